"""The real nightly (real asv) on a scratch history in which a regression was reverted by the
next commit, before any benchmark saw the revert.

The DRAM derate at commit 10 (device time x1.13-1.33) is reverted by commit 11, which stride
2 does not benchmark: commit 10 is a one-commit excursion, and the night reports nothing for
it. Six benchmarked commits come before it: a transient is told from noise by the spread of
successive differences, and in a five-commit history the excursion makes half of them. A
series the excursion moved only a little, whose next benchmarked commit stayed up by noise,
may leave an alert; the probe measured at the head finds it back and the alert is `fixed`,
naming the revert's range.
"""

import json

import pytest
from conftest import run_cli, seed_asv_env

from regressions.groundtruth import scratch
from regressions.records import alert_store

pytestmark = pytest.mark.slow
GRID = {"SPYRE_REGRESS_GRID": "demo"}


@pytest.fixture(scope="module")
def night(tmp_path_factory, asv_env):
    root = tmp_path_factory.mktemp("excursion")
    # 16 commits; stride 2 benchmarks 0, 2, ..., 10 (the derate), 12, 14 and the newest, 15
    records = scratch.build(root / "repo", [None] * 9 + ["dram_derate", "revert:dram_derate"]
                            + [None] * 4)
    seed_asv_env(root / "repo" / ".asv" / "env", asv_env)
    done = run_cli("nightly", "--repo", str(root / "repo"), "--stride", "2", "--bench",
                   "ExecuteDeviceTime", "--state", str(root / "state"), "--reports",
                   str(root / "reports"), "--machine", "edge", cwd=root, timeout=2400, **GRID)
    return root, records, done


def test_a_regression_the_next_commit_reverted_is_reported_as_nothing(night):
    root, records, done = night
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    derate = records[10].sha
    assert records[11].injection == "revert:dram_derate"
    database = alert_store.AlertStore(root / "state" / "alerts.sqlite")
    place = {r.sha: i for i, r in enumerate(records)}
    around = [r for r in database.records()
              if place[r.good_commit] < 10 <= place[r.bad_commit] or r.culprit == derate]
    database.close()
    for record in around:
        assert record.status != "reported", record.note
        if record.status == "fixed":
            assert record.fixed_in is not None  # a fixed record says where
            assert place[record.fixed_in[0]] < 11 <= place[record.fixed_in[1]]
    assert not list((root / "reports").glob("culprit-*"))
    spikes = json.loads((root / "state" / "transients.json").read_text())["transients"]
    assert {t["params"] for t in spikes if t["commit"] == derate} >= {"('mlp', 127)",
                                                                       "('mlp', 128)"}
