"""Ctrl-C at every phase of a nightly, then the next nightly: nothing lost, nothing twice.

Each case runs the real `spyre-regress nightly` (tests/e2e/nightly_faults.py: asv and the
investigation's measurements replaced, everything that keeps state real) on a 12-commit
history where two series step up at commits 5 and 9, benchmarking every second commit, so
detection measures the unbenchmarked commits 5 and 9 again before it settles on two alerts
with one culprit each. The first run is interrupted by SIGINT to its process group inside one
phase; the second runs to the end. After it, every reported record names a bundle that is on
disk and whole, each culprit has exactly one, nothing half-written is left, no note records
the interruption as a finding, and the records are the ones an uninterrupted night leaves.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import user_environment
from doc_commands import ROOT

from regressions import git
from regressions.records import alert_store

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("nightly_faults.py")
STEPS_AT = (5, 9)  # the commits where the two series step up
FAULTS = ("asv", "remeasure", "bisect", "stages", "knobs", "minimize", "timing", "bundle",
          "record")
# faults that strike once the first alert is reported (its bundle not yet recorded)
AFTER_THE_FIRST_REPORT = ("bisect", "stages", "knobs", "minimize", "timing", "bundle", "record")


def history(root: Path) -> list[str]:
    """12 commits: the project's benchmarks and asv.conf.json, then empty commits."""
    repo = root / "repo"
    git.init_repository(repo)
    shutil.copytree(ROOT / "benchmarks", repo / "benchmarks",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "asv.conf.json", repo)
    shas = [git.commit_all(repo, "import the suite", 1_767_225_600)]
    for number in range(1, 12):
        (repo / "CHANGES").write_text(f"change {number}\n")
        shas.append(git.commit_all(repo, f"change {number}", 1_767_225_600 + number * 3600))
    (root / "steps.json").write_text(json.dumps(list(STEPS_AT)))
    return shas


def nightly(root: Path, fault: str) -> subprocess.CompletedProcess:
    """One nightly in a process group of its own (the fault's SIGINT reaches only it)."""
    command = [sys.executable, str(DRIVER), fault, "--", "nightly", "--repo",
               str(root / "repo"), "--state", str(root / "state"), "--reports",
               str(root / "reports"), "--stride", "2", "--machine", "faults"]
    return subprocess.run(command, cwd=root, env=user_environment(), capture_output=True,
                          text=True, timeout=900, start_new_session=True)


def records(root: Path) -> tuple[list, dict]:
    database = alert_store.AlertStore(root / "state" / "alerts.sqlite")
    try:
        return database.records(), database.extras()
    finally:
        database.close()


def outcome(root: Path) -> list[tuple]:
    found, _ = records(root)
    return [(r.id, r.kind, r.status, r.culprit, r.good_commit, r.bad_commit) for r in found]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    root = tmp_path_factory.mktemp("uninterrupted")
    shas = history(root)
    done = nightly(root, "none")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-4000:]
    assert "re-measuring" in done.stderr  # the re-measurement phase exists to be interrupted
    found = outcome(root)
    assert [(status, culprit) for _, _, status, culprit, _, _ in found] == [
        ("reported", shas[STEPS_AT[0]]), ("reported", shas[STEPS_AT[1]])]
    return found


def assert_disk_agrees(root: Path) -> None:
    """Every reported record's bundle on disk and whole, one per culprit, nothing partial."""
    found, extras = records(root)
    bundles = sorted((root / "reports").glob("culprit-*/*/summary.json"))
    reported = [r for r in found if r.status == "reported"]
    assert len(bundles) == len({r.culprit for r in reported}) == 2, bundles
    for record in reported:
        folder = Path(extras[record.id]["report"])
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["commits"]["culprit"] == record.culprit
        assert extras[record.id]["stage"] == summary["first_divergent_stage"]
        with tarfile.open(folder.with_name(f"{folder.name}.tar.gz")) as archive:
            assert f"{folder.name}/report.md" in archive.getnames()
    for place in ("reports", "state"):
        left = [p for p in (root / place).rglob("*") if p.name.startswith(".")
                or p.name.endswith(".partial") or p.name == "nightly.lock"]
        assert not left, left  # staging folders, half archives, temporary files, the lock
    for record in found:
        for note in record.history:
            assert "untestable" not in note and "failed" not in note, note


@pytest.mark.parametrize("fault", FAULTS)
def test_an_interrupted_night_loses_nothing_on_the_next(fault, uninterrupted, tmp_path):
    shas = history(tmp_path)
    stopped = nightly(tmp_path, fault)
    assert stopped.returncode == 130, stopped.stdout[-2000:] + stopped.stderr[-4000:]
    assert "fault: Ctrl-C in" in stopped.stderr
    assert stopped.stderr.rstrip().endswith("spyre-regress: interrupted")
    again = nightly(tmp_path, "none")
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-4000:]
    assert outcome(tmp_path) == uninterrupted
    assert_disk_agrees(tmp_path)
    # each culprit's report written once by the run that recovers
    for culprit in (shas[c] for c in STEPS_AT):
        assert again.stderr.count(f"culprit {culprit[:12]}: report for alert(s)") == 1
    recovered = "writing it from the saved investigation" in again.stderr
    assert recovered == (fault in AFTER_THE_FIRST_REPORT), again.stderr[-3000:]
