"""The real `spyre-regress nightly`, interrupted where a test says: run as a script by
tests/e2e/test_interrupted_nightly.py, in a process group of its own.

    python nightly_faults.py FAULT -- nightly --repo R --state S --reports D --stride 2

Everything of the nightly runs as installed - the CLI, the lock, git, the SQLite alert store,
`night.run_night`, detection and re-measurement on asv's results read back from disk, the
Reporter's saved investigations, records and bundles - except two seams:

- asv itself (`processes.run_asv`): `FakeAsv` writes asv result documents, two device-time
  series that each step up x1.5 at a known commit, 20 samples per run;
- the investigation's measurements: `StepInvestigator` takes the investigation's five steps
  in order and returns a recorded (synthetic) investigation addressed to the alert's culprit.
  A real investigation of even a tiny program takes about a minute here, and this test runs
  a dozen nights; the real steps' own handling of an interrupt (a probe killed by the same
  SIGINT) is tests/test_processes.py's.

FAULT names where Ctrl-C strikes: SIGINT is sent to the whole process group, as a terminal
does, from inside that phase: `asv` (after half of the commits are measured), `remeasure`,
one of the steps `bisect`, `stages`, `knobs`, `minimize`, `timing` (of the second alert, so
the first is reported and not yet published), `bundle` (while the first bundle's archive is
written), `record` (the first bundle written, its path not yet recorded), or `none`.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import NoReturn
from unittest import mock

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from test_bundle import synthetic_investigation  # noqa: E402  (the tests folder, above)

from regressions.investigation import model  # noqa: E402
from regressions.records import asv_documents, files  # noqa: E402

BENCHMARK = "bench_execute.ExecuteDeviceTime.time_device"
PARAMS = [["'mlp'", "'softmax'"], ["127"]]
STEPS = ("bisect", "stages", "knobs", "minimize", "timing")
SAMPLES = 20
MACHINE, ENV = "faults", "fake-env"


def ctrl_c(where: str) -> NoReturn:
    """What a terminal's Ctrl-C does: SIGINT to every process of the group."""
    print(f"fault: Ctrl-C in {where}", file=sys.stderr, flush=True)
    os.killpg(os.getpgrp(), signal.SIGINT)
    time.sleep(30)  # the KeyboardInterrupt arrives here
    raise AssertionError("SIGINT did not interrupt the run")


class FakeAsv:
    """`asv machine|run|publish` on the results store: series `i` steps up x1.5 at commit
    `steps[i]` of the history; a commit's run is skipped when its results exist, as
    --skip-existing-commits does; --append-samples adds 20 samples to the named series."""

    def __init__(self, repo: Path, steps: tuple[int, ...], fault: str) -> None:
        self.repo, self.steps, self.fault = repo, steps, fault
        out = subprocess.run(["git", "-C", str(repo), "rev-list", "--reverse", "HEAD"],
                             check=True, capture_output=True, text=True).stdout
        self.history = out.split()
        self.results = repo / ".asv" / "results"

    def __call__(self, arguments, cwd, env=None, stream=None, timeout=None):
        if arguments[0] == "run" and arguments[-1].startswith("HASHFILE:"):
            hashes = Path(arguments[-1].split(":", 1)[1]).read_text().split()
            self.benchmark_list()
            for number, sha in enumerate(hashes):
                if self.fault == "asv" and number == len(hashes) // 2:
                    ctrl_c("asv run")
                if not self.path(sha).exists():
                    self.write(sha, [0, 1])
        elif arguments[0] == "run":  # --append-samples on one commit, named series
            if self.fault == "remeasure":
                ctrl_c("asv run --append-samples")
            wanted = [a.split("=", 1)[1] for a in arguments if a.startswith("--bench=")]
            self.write(arguments[-1].removesuffix("^!"),
                       [i for i in (0, 1) if any(re.search(w, self.name(i)) for w in wanted)])
        elif arguments[0] == "publish":
            (self.repo / ".asv" / "html").mkdir(parents=True, exist_ok=True)
        return subprocess.CompletedProcess(arguments, 0, "", "")

    def name(self, series: int) -> str:
        return f"{BENCHMARK}({PARAMS[0][series]}, 127)"

    def path(self, sha: str) -> Path:
        return asv_documents.result_path(self.results, MACHINE, sha, ENV)

    def benchmark_list(self) -> None:
        files.write_json(self.results / "benchmarks.json", {"version": 2, BENCHMARK: {
            "name": BENCHMARK, "type": "time", "version": "1", "params": PARAMS,
            "param_names": ["workload", "seq"], "unit": "seconds"}})
        files.write_json(self.results / MACHINE / "machine.json",
                         {"machine": MACHINE, "version": 1})

    def write(self, sha: str, series: list[int]) -> None:
        path = self.path(sha)
        place = self.history.index(sha)
        document = json.loads(path.read_text()) if path.exists() else \
            asv_documents.new_document(sha, ENV, 1_767_225_600_000 + place * 3_600_000,
                                       MACHINE)
        row = document["results"].setdefault(BENCHMARK, asv_documents.new_row(PARAMS, "1"))
        for s in series:
            runs = len(row[asv_documents.RESULT_COLUMNS.index("samples")][s] or ()) // SAMPLES
            # seeded by place, not sha: the same draws whatever the copied files hash to
            noise = random.Random(f"{place}-{s}-{runs}")
            level = 100e-6 * (1.5 if place >= self.steps[s] else 1.0)
            asv_documents.set_result(row, s, [level * math.exp(noise.gauss(0, 0.01))
                                              for _ in range(SAMPLES)])
        files.write_text(path, json.dumps(document) + "\n")


class HeadProber:
    """The probe at the branch head (the nightly's check that a reported regression is still
    there): FakeAsv's steps never return, so the head measures what the culprit measured."""

    def __init__(self) -> None:
        self.culprit_samples: dict[str, tuple[float, ...]] = {}  # per workload

    def bench(self, commit, target, samples=None):
        from regressions.bisection.commits import Measurement

        return Measurement(commit=commit, status="ok",
                           samples=self.culprit_samples[target.workload])


class StepInvestigator:
    """The Reporter's investigator: the five steps in order, then a recorded investigation
    of the alert (culprit: the alert's bad commit, as bisection of a one-commit range says)."""

    def __init__(self, history, prober, progress, fault: str = "none") -> None:
        self.history, self.progress, self.fault = history, progress, fault
        self.seen: list[str] = []
        self.prober = HeadProber()

    def investigate(self, alert, target, out_dir: Path, floors=()):
        if alert.bad_commit not in self.seen:
            self.seen.append(alert.bad_commit)
        for step in STEPS:
            self.progress(f"{step} of {alert.bad_commit[:10]} (stand-in)")
            if self.fault == step and len(self.seen) == 2:
                ctrl_c(f"the {step} step of the second alert")
        culprit = self.history.describe(alert.bad_commit)
        parent = self.history.describe(self.history.parent(alert.bad_commit))
        out_dir.mkdir(parents=True, exist_ok=True)
        recorded = synthetic_investigation(out_dir)
        samples = dict(zip((parent.sha, culprit.sha), recorded.bisect.samples.values(),
                           strict=True))
        self.prober.culprit_samples[target.workload] = samples[culprit.sha]
        return replace(recorded, alert=alert, commits=model.Commits(parent, culprit, culprit),
                       bisect=replace(recorded.bisect, culprit=culprit.sha, good=parent.sha,
                                      bad=culprit.sha, samples=samples))


def install(fault: str, repo: Path, steps: tuple[int, ...]) -> None:
    """The two seams, and the fault's place in the bundle writing if it is there: each put
    in place for the rest of the process (`mock.patch.object(...).start()`)."""
    import tarfile

    from regressions import processes
    from spyre_regress import reporting

    mock.patch.object(processes, "run_asv", FakeAsv(repo, steps, fault)).start()

    def investigator(history, prober, progress, probes=1, samples=100) -> StepInvestigator:
        return StepInvestigator(history, prober, progress, fault)

    mock.patch.object(reporting, "Investigator", investigator).start()
    if fault == "bundle":  # inside reports.bundle._archive, the archive half written
        add = tarfile.TarFile.add

        def add_then_stop(self, name, *args, **kwargs):
            add(self, name, *args, **kwargs)
            if Path(name).name == "report.md":
                ctrl_c("writing the first bundle's archive")

        mock.patch.object(tarfile.TarFile, "add", add_then_stop).start()
    if fault == "record":
        write_bundle = reporting.write_bundle

        def written_then_stop(investigation, out_dir, repo_name=None) -> NoReturn:
            write_bundle(investigation, out_dir, repo_name)
            ctrl_c("recording the first bundle's path")

        mock.patch.object(reporting, "write_bundle", written_then_stop).start()


def main(argv: list[str]) -> int:
    # a process started in the background of a non-interactive shell inherits SIGINT
    # ignored, and Ctrl-C would then be lost whatever the nightly does: take it as a
    # terminal's foreground process does
    signal.signal(signal.SIGINT, signal.default_int_handler)
    fault, separator, *command = argv
    assert separator == "--"
    repo = Path(command[command.index("--repo") + 1])
    steps = tuple(json.loads((repo.parent / "steps.json").read_text()))
    install(fault, repo, steps)
    from spyre_regress import cli

    return cli.main(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
