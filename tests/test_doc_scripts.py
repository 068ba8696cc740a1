"""The scripts that produce the docs' tables of figures (docs/measurements/), run on tiny
inputs: each prints what its page quotes, from the project's own code."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import count_tests  # noqa: E402
import numerics_grid_cost  # noqa: E402
import timing_sanity  # noqa: E402
import torch_spyre_night  # noqa: E402


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
