"""scripts/asv_cost.py: where an asv run's wall time goes, read from asv's stamped lines (a
line is stamped when asv starts the next one) and from the results it wrote."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import asv_cost  # noqa: E402


def test_a_round_splits_into_its_install_and_its_forkservers_suite_import():
    lines = [(3.3, "· Creating environments"),
             (3.3, "· For spyre-regress commit ff04926b <main> (round 1/7):"),
             (6.6, "·· Benchmarking virtualenv-py3.11"),
             (9.5, "··· Running (bench_compile.CompileStage.time_stage--)."),
             (9.5, "· For spyre-regress commit 32d97c63 <main~1> (round 1/7):"),
             (12.0, "·· Building for virtualenv-py3.11"),
             (15.2, "·· Benchmarking virtualenv-py3.11")]
    first, rounds_seen, rounds = asv_cost.phases(lines)
    assert (first, rounds) == (3.3, 7)
    assert [(commit, number, round(installed, 1), round(imported, 1))
            for commit, number, installed, imported in rounds_seen] == [
        ("ff04926b", 1, 0.0, 3.3), ("32d97c63", 1, 2.5, 3.2)]


def test_a_run_of_one_round_is_read_too():
    """asv prints "(round i/n)" only when it interleaves rounds: `asv run REV^!` runs every
    round of its one commit under one header (and records each benchmark's duration summed
    over them, so the rounds to multiply by are 1)."""
    lines = [(15.1, "·· Installing b5a208d8 <main> into virtualenv-py3.11"),
             (15.2, "· For torch-spyre commit b5a208d8 <main>:"),
             (21.0, "·· Benchmarking virtualenv-py3.11")]
    first, rounds_seen, rounds = asv_cost.phases(lines)
    assert (first, rounds) == (15.2, 1)
    assert [(c, n, round(i, 1), round(m, 1)) for c, n, i, m in rounds_seen] == [
        ("b5a208d8", 1, 0.0, 5.8)]


def test_only_what_this_run_measured_is_counted(tmp_path):
    machine = tmp_path / "results" / "m"
    machine.mkdir(parents=True)
    (tmp_path / "results" / "benchmarks.json").write_text(json.dumps(
        {"bench_compile.CompileStage.time_stage": {"rounds": 7},
         "bench_numerics.NumericsStageError.track_max_abs_error": {"rounds": 1},
         "version": 2}))
    columns = ["result", "started_at", "duration"]
    (machine / "ff04926b-env.json").write_text(json.dumps({
        "version": 2, "commit_hash": "ff04926b" + "0" * 32, "result_columns": columns,
        "results": {"bench_compile.CompileStage.time_stage": [[1.0], 2_000, 3.0],
                    "bench_numerics.NumericsStageError.track_max_abs_error": [[1.0], 10, 5.0]},
        "durations": {"<setup_cache bench_numerics:149>": 4.0}}))
    costs = asv_cost.family_costs(tmp_path / "results", {"ff04926b"}, 7, since_ms=1_000)
    assert costs["bench_compile"]["benchmarks"] == 21.0  # 3 s in each of its 7 rounds
    assert costs["bench_numerics"] == {"benchmarks": 0.0, "setup_cache": 4.0}  # an older run's
