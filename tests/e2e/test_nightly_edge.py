"""The real nightly (real asv) on a scratch history whose newest commit is a regression, run
on a Dask cluster as on real hosts that loses a worker in the middle of the night.

The change lands in tonight's newest commit: one commit holds the new level. The first
nightly that benchmarks it must report it, provisionally, with its culprit, stage and kind,
in one bundle; the re-measurement it asked for lands in asv's results store; and a worker
killed after the first unit of work costs the night nothing: every sample is stored once,
and each measured the same as in a single process.
"""

import ast
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SCRIPT, compile_workload, run_cli, seed_asv_env, user_environment

from regressions.groundtruth import scratch
from regressions.records import alert_store, results

pytestmark = pytest.mark.slow
GRID = {"SPYRE_REGRESS_GRID": "demo"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, asv_env):
    """A Dask cluster as on real hosts: `dask scheduler` and two `dask worker` processes (no
    nanny, so a killed worker stays dead), on localhost. Their temporary directory, where a
    worker keeps its asv environments (`spyre-regress-workers/<name>/env`), is the test's."""
    root = tmp_path_factory.mktemp("cluster")
    dask = str(Path(sys.executable).with_name("dask"))
    address_file = root / "scheduler.json"
    logs = open(root / "cluster.log", "w")  # noqa: SIM115 (open for the fixture's life)
    processes = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                   "--no-dashboard", "--scheduler-file", str(address_file)],
                                  stdout=logs, stderr=subprocess.STDOUT)]
    deadline = time.monotonic() + 120
    while not address_file.is_file() and time.monotonic() < deadline:
        time.sleep(0.5)
    address = json.loads(address_file.read_text())["address"]
    for name in ("w0", "w1"):
        seed_asv_env(root / "spyre-regress-workers" / name / "env", asv_env)
        processes.append(subprocess.Popen(
            [dask, "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-nanny",
             "--name", name, "--local-directory", str(root / name)],
            stdout=logs, stderr=subprocess.STDOUT,
            env={**os.environ, **GRID, "TMPDIR": str(root)}))
    from distributed import Client

    with Client(address, timeout="60s") as client:
        client.wait_for_workers(2, timeout=120)
    yield address, processes[2]
    for process in processes:
        process.kill()
        process.wait()
    logs.close()


@pytest.fixture(scope="module")
def night(tmp_path_factory, asv_env, cluster):
    """`spyre-regress nightly --scheduler ADDRESS` as a user runs it; one of the two workers
    is killed once the first unit of work is merged."""
    address, doomed = cluster
    root = tmp_path_factory.mktemp("edge")
    # 9 commits; stride 3 benchmarks 0, 3, 6 and the newest, 8: the regression's
    records = scratch.build(root / "repo", [None] * 7 + ["workdiv_m127"])
    seed_asv_env(root / "repo" / ".asv" / "env", asv_env)
    command = [str(SCRIPT), "nightly", "--repo", str(root / "repo"), "--stride", "3",
               "--bench", "ExecuteDeviceTime", "--state", str(root / "state"), "--reports",
               str(root / "reports"), "--machine", "edge", "--scheduler", address]
    process = subprocess.Popen(command, cwd=root, env=user_environment(**GRID),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    errors = []
    assert process.stdout is not None and process.stderr is not None  # both piped
    for line in process.stderr:  # kill a worker once the first unit of work is merged
        errors.append(line)
        if "done 1 of" in line and doomed.poll() is None:
            doomed.send_signal(signal.SIGKILL)
    out = process.stdout.read()
    done = subprocess.CompletedProcess(command, process.wait(timeout=2400), out,
                                       "".join(errors))
    return root, records, done, doomed


def extra_samples(done: subprocess.CompletedProcess) -> int:
    """The samples re-measurement says it spent, from the nightly's summary."""
    said = re.search(r"re-measured (\d+) extra samples", done.stdout)
    assert said is not None, done.stdout
    return int(said.group(1))


def test_a_regression_in_the_newest_commit_is_reported_the_night_it_lands(night):
    root, records, done, _ = night
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
    assert "culprit" in done.stdout
    listing = run_cli("alerts", "--state", str(root / "state"), cwd=root)
    assert "reported provisional" in listing.stdout and injected[:10] in listing.stdout


def test_the_extra_samples_land_in_the_results_store(night):
    root, records, done, _ = night
    assert extra_samples(done) > 0
    frame = results.load_results(root / "repo" / ".asv" / "results",
                                 repo=root / "repo", machine="edge")
    measured = set(frame["commit"])
    # the newest commit's stride window held commit 7, unbenchmarked: re-measurement added it
    assert records[7].sha in measured
    newest = frame[(frame["commit"] == records[-1].sha) & (frame["status"] == "ok")]
    assert max(len(s) for s in newest["samples"]) > 20  # appended to the night's 20


def test_a_worker_lost_mid_night_loses_no_sample_and_moves_no_measurement(night):
    root, records, done, doomed = night
    assert doomed.poll() is not None  # it died in the middle of the night
    frame = results.load_results(root / "repo" / ".asv" / "results",
                                 repo=root / "repo", machine="edge")
    # every sample stored once: the night's 20 per point at the benchmarked commits, plus
    # exactly the extra samples re-measurement says it spent
    spent = extra_samples(done)
    benchmarked = {records[i].sha for i in (0, 3, 6, 8)}
    ok = frame[frame["status"] == "ok"]
    night_points = ok["commit"].isin(benchmarked).sum()
    assert ok["samples"].map(len).sum() == 20 * night_points + spent
    # the harmless commits measure what this tree's simulator gives in one process without
    # noise: the medians of 20 samples at 1.5% CV are within 3% of it (7 standard errors)
    harmless = ok[ok["commit"].isin({records[i].sha for i in (0, 3, 6)})]
    assert len(harmless) == 3 * len(set(harmless["params"])) >= 12
    expected = {}  # seconds, as asv stores them, per point: one compile each
    for params in set(harmless["params"]):
        workload, seq = ast.literal_eval(params)
        compiled, _, inputs = compile_workload(workload, seq, None, numerics=False,
                                               noise_cv=0.0)
        expected[params] = compiled.run(*inputs).device_time_us * 1e-6
    for params, median in zip(harmless["params"], harmless["value"], strict=True):
        assert abs(median / expected[params] - 1) <= 0.03, (params, median, expected[params])
