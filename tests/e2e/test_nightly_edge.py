"""The real nightly (real asv) on a scratch history whose newest commit is a regression.

The change lands in tonight's newest commit: one commit holds the new level. The first
nightly that benchmarks it must report it, provisionally, with its culprit, stage and kind,
in one bundle; and the re-measurement it asked for lands in asv's results store.
"""

import json

import pytest
from conftest import run_cli

from regressions.groundtruth import scratch
from regressions.records import alert_store, results

pytestmark = pytest.mark.slow
GRID = {"SPYRE_REGRESS_GRID": "demo"}


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    root = tmp_path_factory.mktemp("edge")
    # 9 commits; stride 3 benchmarks 0, 3, 6 and the newest, 8: the regression's
    records = scratch.build(root / "repo", [None] * 7 + ["workdiv_m127"])
    done = run_cli("nightly", "--repo", str(root / "repo"), "--stride", "3", "--bench",
                   "ExecuteDeviceTime", "--state", str(root / "state"), "--reports",
                   str(root / "reports"), "--machine", "edge", cwd=root, timeout=2400, **GRID)
    return root, records, done


def test_a_regression_in_the_newest_commit_is_reported_the_night_it_lands(night):
    root, records, done = night
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    injected = records[-1].sha
    database = alert_store.AlertStore(root / "state" / "alerts.sqlite")
    reported = [r for r in database.records() if r.status == "reported"]
    extras = database.extras()
    database.close()
    assert [(r.culprit, r.kind) for r in reported] == [(injected, "device_time")]
    assert reported[0].provisional  # one commit holds the level: later nights decide
    assert extras[reported[0].id]["stage"] == "kernel"
    (bundle,) = (root / "reports").glob("culprit-*/device_time-*/")
    summary = json.loads((bundle / "summary.json").read_text())
    assert summary["commits"]["culprit"] == injected
    assert "Provisional" in summary["causal_statement"]
    listing = run_cli("alerts", "--state", str(root / "state"), cwd=root)
    assert "reported provisional" in listing.stdout and injected[:10] in listing.stdout


def test_the_extra_samples_land_in_the_results_store(night):
    root, records, done = night
    assert "re-measuring" in done.stderr
    frame = results.load_results(root / "repo" / ".asv" / "results",
                                 repo=root / "repo", machine="edge")
    measured = set(frame["commit"])
    # the newest commit's stride window held commit 7, unbenchmarked: re-measurement added it
    assert records[7].sha in measured
    newest = frame[(frame["commit"] == records[-1].sha) & (frame["status"] == "ok")]
    assert max(len(s) for s in newest["samples"]) > 20  # appended to the night's 20
