"""scripts/real_store_check.py as a user runs it, on a small store scripts/bench_detect.py
writes (one runner change that speeds 80% of the series up, one +5% step): the change is one
environment alert both ways round, better as is and worse mirrored, where its members are
the regressions it explains."""

import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def run(script, *args, cwd):
    done = subprocess.run([sys.executable, str(SCRIPTS / script), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_runner_change_is_one_environment_alert_both_ways_round(tmp_path):
    written = run("bench_detect.py", "--out", str(tmp_path / "store"), "--benchmarks", "10",
                  "--params", "3", "--commits", "80", "--runner-changes", "1", "--seed", "3",
                  cwd=tmp_path)
    assert "1 at a planted step" in written and "environment alerts at [58]" in written
    lines = run("real_store_check.py", "--results", str(tmp_path / "store" / "results"),
                "--machine", "synthetic", cwd=tmp_path).splitlines()
    as_is = lines.index(next(x for x in lines if x.startswith("synthetic, as is:")))
    mirrored = lines.index(next(x for x in lines if x.startswith("synthetic, mirrored")))
    assert "1 environment alert(s) explaining 0 regression(s)" in lines[as_is]
    assert "shared/better 1" in lines[as_is + 1]
    # read the other way round the faster runner is a slower one: 24 "regressions" explained
    assert "0 regression alert(s)" in lines[mirrored]
    assert "1 environment alert(s) explaining 24 regression(s)" in lines[mirrored]
    assert "shared/worse 1" in lines[mirrored + 1]
