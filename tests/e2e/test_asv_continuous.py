"""`asv continuous` end to end: a commit that slows the simulated device fails the gate (exit 1)
and names the slower benchmark; a docs-only commit passes (exit 0).

The scratch repository is a clone of this one with the working tree's suite (asv.conf.json,
benchmarks/) laid over it, so the suite under test is the one being edited, committed or not.
On top come two commits: one halves the CPU-fallback throughput of the device model (only the
embedding workload falls back: its device time at seq 128 rises ~1.5x, softmax's does not move),
and one that only touches the README. Both asv runs share one environment in the clone's
.asv/env, seeded from the session's (`asv_env` in conftest: the project's asv.conf.json builds
the same environment as the scratch histories'), and select two device-time benchmarks with
`--bench`. The demo's test creates an environment as a user's first run does.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import seed_asv_env

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MACHINE = "asv-suite-test"  # an entry in ~/.asv-machine.json; asv has no other place for it
SLOWER = "bench_execute.ExecuteDeviceTime.time_device('embedding', 128)"
UNCHANGED = "bench_execute.ExecuteDeviceTime.time_device('softmax', 1)"
SUBSET = ("--bench", re.escape(SLOWER), "--bench", re.escape(UNCHANGED))


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                            text=True)
    return result.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def asv(repo: Path, *args: str) -> subprocess.CompletedProcess:
    """Run asv with this interpreter; its directory first on PATH so asv finds python3.11."""
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable),
                                                 os.environ.get("PATH", "")]))
    return subprocess.run([sys.executable, "-m", "asv", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=1200)


def comparison_rows(output: str) -> dict[str, list[str]]:
    """asv's comparison table: benchmark name -> its cells (change, before, after, ratio)."""
    rows = {}
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 5 and cells[4].startswith("bench_"):
            rows[cells[4]] = cells[:4]
    return rows


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, asv_env):
    """The scratch clone and its commits: base (the suite), slower, docs-only."""
    repo = tmp_path_factory.mktemp("asv-continuous") / "repo"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(repo)], check=True)
    seed_asv_env(repo / ".asv" / "env", asv_env)
    git(repo, "checkout", "--quiet", "-B", "main")
    git(repo, "config", "user.name", "asv suite test")
    git(repo, "config", "user.email", "asv-suite-test@example.invalid")
    shutil.copy2(ROOT / "asv.conf.json", repo / "asv.conf.json")
    shutil.copytree(ROOT / "benchmarks", repo / "benchmarks", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    base = commit(repo, "the asv suite under test")

    device = repo / "spyre_sim" / "device.py"
    text, count = re.subn(r"(host_fallback_elems_per_us: float = )([0-9.]+)",
                          lambda m: f"{m[1]}{float(m[2]) / 2}", device.read_text())
    assert count == 1, "DeviceParams.host_fallback_elems_per_us not found in spyre_sim/device.py"
    device.write_text(text)
    slower = commit(repo, "device model: half the CPU-fallback throughput")

    with (repo / "README.md").open("a") as readme:
        readme.write("\nA line of documentation.\n")
    docs = commit(repo, "docs only")

    machine = asv(repo, "machine", "--yes", "--machine", MACHINE)
    assert machine.returncode == 0, machine.stdout + machine.stderr
    return repo, base, slower, docs


def test_a_slower_device_fails_the_gate_and_names_the_benchmark(scratch):
    repo, base, slower, _ = scratch
    result = asv(repo, "continuous", "--machine", MACHINE, *SUBSET, base, slower)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "PERFORMANCE DECREASED" in result.stdout, output
    rows = comparison_rows(result.stdout)
    assert list(rows) == [SLOWER], output  # softmax does not fall back: unchanged, not listed
    change, _, _, ratio = rows[SLOWER]
    assert change == "+"
    assert float(ratio) >= 1.2


def test_an_unchanged_pair_passes_the_gate(scratch):
    repo, _, slower, docs = scratch
    result = asv(repo, "continuous", "--machine", MACHINE, *SUBSET, slower, docs)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "BENCHMARKS NOT SIGNIFICANTLY CHANGED" in result.stdout, output
    assert comparison_rows(result.stdout) == {}


def test_the_premerge_workflow_step_fails_on_the_slower_device_and_writes_its_summary(
        scratch, tmp_path):
    """.github/workflows/premerge.yml's `asv continuous` step, its script as written, run as a
    runner runs it: bash, the pull request's base and head, GITHUB_STEP_SUMMARY set."""
    import yaml  # a dependency of dask's

    repo, base, slower, _ = scratch
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "premerge.yml").read_text())
    steps = workflow["jobs"]["asv-continuous"]["steps"]
    script = next(step["run"] for step in steps if step.get("name") == "asv continuous")
    git(repo, "checkout", "--quiet", slower)
    summary = tmp_path / "summary.md"
    env = dict(os.environ, BASE=base, BENCH=re.escape(SLOWER), GITHUB_STEP_SUMMARY=str(summary),
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    try:
        done = subprocess.run(["bash", "-e", "-c", script], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=1200)
    finally:
        git(repo, "checkout", "--quiet", "main")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output  # asv's own verdict: a benchmark got worse
    text = summary.read_text()
    assert text.startswith(f"## asv continuous {base[:10]}..{slower[:10]}: exit 1"), text
    assert "PERFORMANCE DECREASED" in text, text
    assert SLOWER in text, text  # asv compare --only-changed names the slower row
    assert (repo / ".asv" / "html" / "index.html").exists()  # the dashboard artifact
