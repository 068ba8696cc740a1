"""scripts/real_store_check.py as a user runs it, on a small store scripts/bench_detect.py
writes (one runner change that speeds 80% of the series up, one +5% step): the change is one
environment alert both ways round, better as is and worse mirrored, where its members are
the regressions it explains."""

import json
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


def test_agreement_with_asvs_published_list(tmp_path):
    """A site as asv publish writes it for the small format-1 store (`recovery_store`): its
    list names Stays' step (still open: agree), Recovers' step (listed when it was
    published, since fixed: recovered) and a step of Flat that detect does not see."""
    from test_real_stores import COMMITS, store

    results = store(tmp_path)
    commits = {c: f"{c + 1:08x}" + "ab" * 16 for c in range(COMMITS)}
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.json").write_text(json.dumps(
        {"revision_to_hash": {str(c): sha for c, sha in commits.items()}}))
    graph = "graphs/branch-main/machine-oldbox/python-3.8/{}.json"

    def entry(name, before, after):
        return [name, graph.format(name), {"python": "3.8"}, None, 1.3, 1.0,
                [[before, after, 1.0, 1.3]]]

    (site / "regressions.json").write_text(json.dumps({"regressions": [
        entry("bench_suite.Stays.time_run", 19, 20),
        entry("bench_suite.Recovers.time_run", 9, 10),
        entry("bench_suite.Flat.time_run", 24, 25)]}))
    lines = run("real_store_check.py", "--results", str(results), "--machine", "oldbox",
                "--agreement", str(site), cwd=tmp_path).splitlines()
    assert lines[0].startswith("oldbox: 3 series; detect: 2 alert(s), 1 open; asv publish "
                               "lists 3")
    verdicts = {line.split()[1]: line.split(": ")[1] for line in lines[1:4]}
    assert verdicts == {"bench_suite.Stays.time_run": "agree",
                        "bench_suite.Recovers.time_run": "recovered",
                        "bench_suite.Flat.time_run": "not reported"}
    assert lines[4] == "  agree 1, not reported 1, recovered 1"
    # what detect tested at asv's jump on Flat, and its points either side
    flat = next(line for line in lines if "bench_suite.Flat.time_run" in line)
    assert "point(s) before asv's jump" in flat and "from it" in flat
    # the site's revisions as history: here the same order as the stored dates
    ordered = run("real_store_check.py", "--results", str(results), "--machine", "oldbox",
                  "--agreement", str(site), "--history", "site", cwd=tmp_path).splitlines()
    assert ordered[0].endswith(f"{COMMITS} commits in the order of the site")
    assert ordered[1:] == lines[1:]


def test_a_one_commit_dip_before_asvs_jump():
    """FlowKit's x4.02 entry: a cost that is 302.45 at every commit but one, 75.25 just
    before asv's jump; asv judges the newest value against that best one. A step up that
    lasts is no dip."""
    sys.path.insert(0, str(SCRIPTS))
    from real_store_check import dip_before

    from regressions.detection.detect import Series

    shas = [f"{c:040x}" for c in range(1, 17)]
    revision = {sha: 100 + c for c, sha in enumerate(shas)}
    entry = {"after": revision[shas[11]], "after_hash": shas[11]}

    def series(values):
        return Series(machine="m", env="py3.7", benchmark="suite.track_cost", params="()",
                      commits=tuple(shas),
                      positions=tuple(range(len(shas))), samples=tuple((v,) for v in values))

    def everything(_):
        return True

    dip = dip_before(entry, [series([302.45] * 10 + [75.25] + [302.45] * 5)], revision,
                     everything)
    assert dip is not None and dip[0] == shas[10] and abs(dip[1] - 75.25 / 302.45) < 1e-9
    assert dip_before(entry, [series([75.25] * 11 + [302.45] * 5)], revision,
                      everything) is None
