"""The scripts that produce the docs' tables of figures (docs/measurements/), run on tiny
inputs: each prints what its page quotes, from the project's own code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import asv_cost  # noqa: E402

_ENVIRONMENT = dict(os.environ)
import clock_spread  # noqa: E402  (sets OMP/OPENBLAS_NUM_THREADS for its own runs)

os.environ.clear()  # ... which must not reach the tests that run after these in the process
os.environ.update(_ENVIRONMENT)
import count_tests  # noqa: E402
import edge_screen  # noqa: E402
import inductor_costs  # noqa: E402
import numerics_grid_cost  # noqa: E402
import other_detectors  # noqa: E402
import readme_commands  # noqa: E402
import short_step_cuts  # noqa: E402
import timing_sanity  # noqa: E402
import torch_spyre_night  # noqa: E402
import torch_spyre_range_night  # noqa: E402


def test_the_numerics_grid_is_timed_pair_by_pair(capsys):
    numerics_grid_cost.main(["--workloads", "layernorm", "--seqs", "1", "128",
                             "--stages", "decompose"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["layernorm", "seq", "1"]
    assert out[1].split()[:3] == ["layernorm", "seq", "128"]
    assert out[-1].startswith("2 pairs x 1 stages: ")
    assert "the 1 pairs at seq 127 and 128" in out[-1]


def test_the_model_prices_one_op_kernels_and_draws_mean_one_noise():
    times = timing_sanity.kernel_times((64, 256), cores=32)
    assert set(times) == {"gelu", "exp", "neg"}
    assert all(us > 0 and bound in ("memory", "compute") for us, bound in times.values())
    assert times["gelu"] == timing_sanity.kernel_times((64, 256), cores=32)["gelu"]  # no noise
    mean, cv = timing_sanity.noise(4000, 0.015)
    assert mean == pytest.approx(1, abs=0.002) and cv == pytest.approx(0.015, rel=0.1)
    assert timing_sanity.noise(10, 0.0) == (1.0, 0.0)


def test_the_calibration_script_is_the_models_own_command(monkeypatch):
    """scripts/timing_calibration.py hands its arguments to `spyre_sim.calibrate.main`."""
    import runpy

    from spyre_sim import calibrate

    seen: list[list[str]] = []

    def main(argv: list[str]) -> int:
        seen.append(argv)
        return 0

    monkeypatch.setattr(calibrate, "main", main)
    monkeypatch.setattr(sys, "argv", ["timing_calibration.py", "--held-out"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(Path(numerics_grid_cost.__file__).with_name("timing_calibration.py")),
                       run_name="__main__")
    assert done.value.code == 0 and seen == [["--held-out"]]


def test_collected_tests_are_counted_per_room_of_the_code():
    ids = ["tests/test_cost.py::test_a", "tests/test_cost.py::test_b[1]",
           "tests/e2e/test_demo.py::test_c", "tests/test_new.py::test_d", "3 tests collected"]
    every = count_tests.count(ids)
    assert every == {"spyre_sim/": 2, "tests/e2e/": 1, "(no room) tests/test_new.py": 1}
    slow = count_tests.count(ids[2:3])
    assert count_tests.rows(every, slow) == ["spyre_sim/ | 2", "tests/e2e/ | 1 (1)",
                                             "(no room) tests/test_new.py | 1"]


def test_the_torch_spyre_night_takes_a_checkout_and_an_output_folder(capsys):
    """It runs torch-spyre's history (minutes, a checkout): here only its usage."""
    with pytest.raises(SystemExit) as done:
        torch_spyre_night.main(["--help"])
    assert done.value.code == 0 and "--checkout" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        torch_spyre_night.main(["out"])  # no checkout
    assert done.value.code == 2


def test_the_readme_commands_are_its_quick_start_blocks():
    """scripts/readme_commands.py times what the README says, not a copy of it."""
    commands = readme_commands.quick_start_commands(
        (Path(readme_commands.ROOT) / "README.md").read_text())
    assert len(commands) == 2
    assert commands[0].endswith("spyre-regress demo") and commands[1] == "./scripts/test.sh"
    readme = "# x\n## Quick start\n```sh\na && b\n# note\n```\ntext\n```sh\nc\n```\n## Next\n"
    assert readme_commands.quick_start_commands(readme) == ["a && b", "c"]


def test_a_short_steps_cut_keeps_its_commits_and_names_the_steps_alert():
    import pandas as pd

    table = pd.DataFrame({"commit": ["aaaa1111", "bbbb2222", "cccc3333"], "value": [1, 2, 3]})
    assert list(short_step_cuts.cut(table, ("aaaa", "cccc"))["value"]) == [1, 3]
    member = {"ratio": 1.25}
    document = {"alerts": [
        {"status": "open", "kind": "time", "good_commit": "c" * 40, "bad_commit": "d" * 40,
         "members": [member]},
        {"status": "awaiting", "kind": "time", "good_commit": "a" * 40, "bad_commit": "b" * 40,
         "members": [{"ratio": 1.03}, {"ratio": 1.68}]},
        {"status": "recovered", "kind": "time", "good_commit": "e" * 40, "bad_commit": "f" * 40,
         "members": [member]}]}
    assert short_step_cuts.describe(document, "bbbb") == [
        "  the step: awaiting time alert, good aaaaaaaa -> bad bbbbbbbb, 2 member(s), x1.03-1.68",
        "  other: open time alert, good cccccccc -> bad dddddddd, 1 member(s), x1.25"]


def test_the_edge_screen_compares_three_screens_and_restores_the_detectors(capsys):
    from regressions.detection import changepoints

    own = changepoints._NoisyAnalysis._edge_scale
    edge_screen.main(["--commits", "4", "--offsets", "0.03", "--flat", "20", "--steps", "10"])
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in out[1:4]] == list(edge_screen.VARIANTS)
    assert [line.split(":")[0] for line in out[4:]] == list(edge_screen.VARIANTS)
    assert all("of 10" in line and "in 20 no-change series" in line for line in out[4:])
    assert changepoints._NoisyAnalysis._edge_scale is own


def test_the_other_detectors_read_commit_means_and_a_missing_package_is_skipped(
        capsys, monkeypatch):
    samples = [[1.0, 1.2], [2.0, 2.0], [3.0, 3.4]]
    assert list(other_detectors.commit_means(samples)) == pytest.approx([1.1, 2.0, 3.2])
    assert other_detectors.mean_variance(samples) == pytest.approx((0.02 + 0 + 0.08) / 3 / 2)
    found = iter([[37], [49, 20], [], [5]])
    recall, alarms = other_detectors.score(lambda _: next(found), [([], [])] * 2,
                                           [([], [])] * 2)
    assert recall == {37: 0.5, 50: 0.5} and alarms == 0.5
    monkeypatch.setattr(other_detectors.importlib.util, "find_spec", lambda name: None)
    other_detectors.main(["--series", "1"])
    out = capsys.readouterr().out
    assert "otava: not installed" in out and "ruptures: not installed" in out


def test_ruptures_finds_the_panels_four_percent_step():
    pytest.importorskip("ruptures")
    from regressions.groundtruth import synthetic

    samples, _ = synthetic.step_series(seed=0)
    assert any(abs(c - 37) <= 1 for c in other_detectors.ruptures_changes(samples))


def test_a_warm_call_sample_is_taken_three_ways_from_one_childs_calls():
    from benchmarks import clocks

    # the second call slow, the rest alike; the reference steady
    pairs = [[0.012, 1e-3]] + [[0.006, 1e-3]] * 8
    samples = clock_spread.warm_call_samples(pairs, min_seconds=0.01)
    scale = clocks.REFERENCE_S / 1e-3
    assert samples["before"] == pytest.approx(0.012 * scale)  # one call reached 10 ms
    assert samples["median of 5"] == pytest.approx(0.006 * scale)
    assert samples["median of 8"] == pytest.approx(0.006 * scale)
    assert clock_spread.coefficient_of_variation([1.0, 1.0]) == 0


def test_the_inductor_costs_compare_each_injection_with_the_commit_before():
    from regressions.groundtruth.scratch import CommitRecord

    records = [CommitRecord("a" * 40, "import", None), CommitRecord("b" * 40, "tanh", "tanh_gelu"),
               CommitRecord("c" * 40, "simd", "scalar_kernels")]
    at = [{n: {"max_rel_error": e, "compile_s": 0.3, "warm_call_s": w} for n in ("gated", "mlp")}
          for e, w in ((1.6e-7, 0.0028), (8.2e-5, 0.0028), (8.2e-5, 0.0235))]
    assert inductor_costs.injection_rows(records, at) == [
        "| `tanh_gelu` | numerics | 1.6e-07 -> 8.2e-05 | 1.6e-07 -> 8.2e-05 |",
        "| `scalar_kernels` | host_time | 2.8 ms -> 23.5 ms | 2.8 ms -> 23.5 ms |"]
    with pytest.raises(SystemExit) as done:
        inductor_costs.main(["captures", "--help"])
    assert done.value.code == 0


def test_asv_cost_times_a_command_that_measures_nothing(tmp_path):
    """`asv setup` and `asv publish` (the asv-suite page's rows) leave no results to read."""
    assert asv_cost.family_costs(tmp_path / "missing", set(), 1) == {}
    assert asv_cost.family_costs(tmp_path, set(), 1) == {}


def test_the_range_night_names_a_commit_by_both_ids_and_its_pr(tmp_path, capsys):
    repo = tmp_path / "history"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "Speed up a pass (#3158)"],
                   check=True)
    here = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    ids = tmp_path / "upstream-ids.tsv"
    ids.write_text(f"commit_here\tcommit_upstream\tdate\tsubject\n{here}\t{'b' * 40}\t-\t-\n")
    upstream = torch_spyre_range_night.upstream_ids(ids)
    assert torch_spyre_range_night.describe_commit(repo, here, upstream) == \
        f"{here[:10]} (upstream bbbbbbbbbb, #3158)"
    assert torch_spyre_range_night.describe_commit(repo, here, {}) == f"{here[:10]} (#3158)"
    assert torch_spyre_range_night.point("('split_multi_ops', 'mlp', 128)") == \
        "split_multi_ops mlp 128"
    with pytest.raises(SystemExit) as stopped:  # nothing to render: says so, runs nothing
        torch_spyre_range_night.main([str(tmp_path / "empty"), "--render-only"])
    assert stopped.value.code == 2
    assert "holds no night" in capsys.readouterr().err
