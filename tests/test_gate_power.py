"""scripts/gate_power.py: asv's verdict on simulated samples, as the docs quote it."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gate_power.py"


def shares(*args: str) -> dict[int, float]:
    done = subprocess.run([sys.executable, str(SCRIPT), "--comparisons", "200", *args],
                          capture_output=True, text=True, timeout=120, check=True)
    found = {}
    for line in done.stdout.splitlines()[1:]:
        count, _, share = line.partition(" a side: flagged worse in ")
        found[int(count)] = float(share.rstrip("%")) / 100
    return found


def test_a_large_step_through_a_small_spread_is_always_flagged_and_none_is_never():
    assert shares("--cv", "0.02", "--step", "1.3", "--samples", "8,16") == {8: 1.0, 16: 1.0}
    assert shares("--cv", "0.02", "--step", "1", "--samples", "8,16") == {8: 0.0, 16: 0.0}


def test_more_samples_see_a_step_through_the_noise_more_often():
    found = shares("--cv", "0.075", "--step", "1.2", "--samples", "6,16")
    assert found[6] < found[16]
    assert found[16] > 0.95
