"""The night, written once: the nightly's seams and the month simulation's take the same
transitions on the same branch.

The month simulation supplies a generator, memory and a clock to `night.run_night`; the
nightly command supplies asv's results store on disk (`nightly.Bench`, which reads back
what `asv run` wrote) and SQLite. Here both run every night of one planted branch, with asv
itself replaced by a stand-in that writes the generator's measurements in asv's results
format, so everything else of the nightly's side runs as it does for real: the results
loader ordering commits by git history, the re-measurement read back from the files,
records through SQLite and their codec.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from regressions import metrics, night
from regressions.groundtruth import month, planted, simulation
from regressions.groundtruth.month import Branch
from regressions.records import alert_store, asv_documents, files, lifecycle
from regressions.records.results import asv_type_of
from spyre_regress import nightly

SHORT = planted.MonthConfig(name="short", places={
    "decode x2": "newest", "softmax +3%": "interior", "attention compile +20%": "newest",
    "fp16 accumulate x2": "interior", "embedding fails": "interior",
    "mlp throughput -12%": "interior",
    "attention compile glitch x1.5": "outlier:attention compile +20%:1",
}, nights=9, initial_commits=12, commits_per_night=8.0, runner_changes=1)


def git_history(repo: Path, count: int) -> list[str]:
    """A repository of `count` empty commits; their shas, oldest first."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for i in range(count):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                        "commit", "-q", "--allow-empty", "-m", f"commit {i}"], check=True)
    out = subprocess.run(["git", "-C", str(repo), "rev-list", "--reverse", "HEAD"],
                         check=True, capture_output=True, text=True).stdout
    return out.split()


def branch_on(shas: list[str], seed: int) -> Branch:
    branch = planted.build_branch(SHORT, seed)
    assert len(branch.commits) == len(shas)
    branch.commits[:] = shas
    return branch


class GeneratorAsv:
    """asv for the nightly's `AsvRunner`: `run` on a hash file writes each new commit's
    results, `run --append-samples` measures the named benchmarks once more at one commit,
    as asv records them (samples appended for timing benchmarks, a value replaced for
    `track_` ones), every measurement drawn from the branch's generator."""

    def __init__(self, branch: Branch, results: Path) -> None:
        self.branch, self.results = branch, results
        self.names: dict[str, list] = {}  # benchmark -> its param lists, in asv's order
        for spec in branch.suite:
            value = ast.literal_eval(spec.params)
            values = value if isinstance(value, tuple) else (value,)
            lists = self.names.setdefault(spec.benchmark, [[] for _ in values])
            for column, v in zip(lists, values, strict=True):
                if repr(v) not in column:
                    column.append(repr(v))
        self.index = {}
        for benchmark, lists in self.names.items():
            for i, combo in enumerate(itertools.product(*lists)):
                self.index[benchmark, f"({', '.join(combo)})"] = i
        files.write_json(results / "benchmarks.json", {"version": 2, **{
            name: {"name": name, "type": asv_type_of(name), "version": "1", "params": lists,
                   "param_names": [f"p{i}" for i in range(len(lists))],
                   "unit": "seconds" if asv_type_of(name) == "time" else "unit",
                   **({"higher_is_better": True} if any(
                       s.higher_is_better for s in branch.suite if s.benchmark == name) else {})}
            for name, lists in self.names.items()}})

    def __call__(self, arguments, cwd, env=None, stream=None):
        if arguments[0] == "run" and arguments[-1].startswith("HASHFILE:"):
            for sha in Path(arguments[-1].split(":", 1)[1]).read_text().split():
                if not self.path(sha).exists():
                    self.write(sha, range(len(self.branch.suite)))
        elif arguments[0] == "run":
            wanted = [re.compile(a.split("=", 1)[1]) for a in arguments
                      if a.startswith("--bench=")]
            self.write(arguments[-1].removesuffix("^!"), [
                i for i, s in enumerate(self.branch.suite)
                if any(w.search(s.name) for w in wanted)])
        return subprocess.CompletedProcess(arguments, 0, "", "")

    def path(self, sha: str) -> Path:
        return asv_documents.result_path(self.results, simulation.MACHINE, sha, simulation.ENV)

    def write(self, sha: str, series) -> None:
        path = self.path(sha)
        document = json.loads(path.read_text()) if path.exists() else \
            asv_documents.new_document(sha, simulation.ENV, 0, simulation.MACHINE)
        commit = self.branch.commits.index(sha)
        for s in series:
            spec = self.branch.suite[s]
            row = document["results"].setdefault(
                spec.benchmark, asv_documents.new_row(self.names[spec.benchmark], "1"))
            timed = asv_documents.has_samples(asv_type_of(spec.benchmark))
            index = self.index[spec.benchmark, spec.params]
            if not timed:
                row[asv_documents.RESULT_COLUMNS.index("samples")][index] = None
            asv_documents.set_result(row, index, self.branch.measure(s, commit), timed=timed)
        files.write_text(path, json.dumps(document) + "\n")


def night_label(number: int) -> Callable[[], str]:
    """What a night's records say it is, as the nightly's clock would."""
    return lambda: f"night {number + 1}"


def transitions(result: night.NightResult) -> list[tuple]:
    return [(e.alert_id, e.before, e.after, e.note) for e in result.events]


@pytest.mark.slow
def test_the_nightlys_seams_take_the_simulations_transitions(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    shas = git_history(repo, len(planted.build_branch(SHORT, 3).commits))
    (repo / "asv.conf.json").write_text("{}\n")
    memory_branch, disk_branch = branch_on(shas, 3), branch_on(shas, 3)
    options = nightly.NightlyOptions(repo=repo, state_dir=tmp_path / "state",
                                     reports_dir=tmp_path / "reports",
                                     machine=simulation.MACHINE)
    options.state_dir.mkdir()
    monkeypatch.setattr(nightly.processes, "run_asv",
                        GeneratorAsv(disk_branch, options.results_dir))
    memory = (simulation.SyntheticBench(memory_branch), simulation.MemoryRecords(),
              simulation.BranchInvestigations(memory_branch))
    database = alert_store.AlertStore(tmp_path / "alerts.sqlite")
    disk = (nightly.Bench(options.store, nightly.AsvRunner(options, lambda _: None)), database,
            simulation.BranchInvestigations(disk_branch))
    reported = environment = 0
    for number in range(len(memory_branch.nights)):
        marks = [shas[c] for c in memory_branch.benchmarked(number)]
        history = shas[:memory_branch.nights[number][1] + 1]
        tonight = {}
        for side, (bench, store, investigations) in (("memory", memory), ("disk", disk)):
            investigations.night = number
            tonight[side] = night.run_night(marks, history, bench, store,
                                            investigations=investigations,
                                            now=night_label(number))
        assert transitions(tonight["disk"]) == transitions(tonight["memory"]), number
        assert [(e.alert_id, e.note) for e in tonight["disk"].environment_events] == \
            [(e.alert_id, e.note) for e in tonight["memory"].environment_events], number
        assert tonight["disk"].remeasurement.spent == tonight["memory"].remeasurement.spent
        reported += len(tonight["memory"].published)
        environment += len(tonight["memory"].environment_events)
    records = [lifecycle.to_dict(r) for r in memory[1].records()]
    assert [lifecycle.to_dict(r) for r in database.records()] == records
    assert database.environment() == memory[1].environment()
    database.close()
    # the branch's planted regressions and its runner change were found: the comparison is
    # not of two empty nights
    assert reported >= 4 and any(r["status"] == "reported" for r in records)
    assert environment >= 1


def two_nights(events, runner_changes=()):
    """A branch of 30 commits over two nights (stride 3: night 2 benchmarks 18, 21, 24, 27
    and 29), with `events` planted; both nights run through the simulation's seams."""
    suite = month.suite()
    branch = Branch(seed=0, suite=suite, commits=[f"{i:040x}" for i in range(30)],
                    nights=[(0, 17), (18, 29)],
                    events=list(events), stride=3, runner_changes=list(runner_changes))
    seams = (simulation.SyntheticBench(branch), simulation.MemoryRecords(),
             simulation.BranchInvestigations(branch))
    nights = []
    for number in range(2):
        seams[2].night = number
        nights.append(night.run_night([branch.commits[c] for c in branch.benchmarked(number)],
                                      branch.commits[:branch.nights[number][1] + 1], *seams,
                                      night_label(number)))
    return branch, nights


def derate(at, revert):
    targets = month.select(month.suite(), month.DEVICE, workload="mlp")
    return [month.Event(label="derate", kind="step", commit=at, targets=targets, factor=1.2,
                        symptom="device_time"),
            month.Event(label="revert", kind="step", commit=revert, targets=targets, factor=1 / 1.2,
                        symptom="device_time")]


def test_a_regression_reverted_before_the_head_is_fixed_and_not_published():
    # held by 21 and 24, reverted by 25: the head (29) is back at the good level
    branch, (_, second) = two_nights(derate(21, 25))
    (record,) = [r for r in second.records if r.kind == "device_time"]
    assert record.culprit == branch.commits[21] and record.status == "fixed"
    assert record.fixed_in == (branch.commits[24], branch.commits[27])  # the revert's range
    assert second.published == []
    assert ("reported" in record.history[0] and record.history[-1].startswith("fixed before"))
    assert any(e.after == "fixed" for e in second.events)


def test_a_regression_the_next_commit_reverted_is_reported_as_nothing():
    # 21 regressed, 22 (not benchmarked) reverted it: a one-commit excursion on every series
    branch, (_, second) = two_nights(derate(21, 22))
    assert [r for r in second.records if r.kind == "device_time"] == [] and not second.published
    spikes = {(t.params, t.commit) for t in second.transients}
    assert {(p, branch.commits[21]) for p in ("('mlp', 1)", "('mlp', 512)")} <= spikes


def test_a_runner_change_is_one_environment_alert_and_nothing_is_investigated():
    branch, (first, second) = two_nights([], [month.RunnerChange(1, 1.25)])
    assert first.environment_events == [] and first.records == []
    (event,) = second.environment_events
    (alert,) = second.environment
    assert alert.bad_commit == branch.commits[18] and alert.direction == "worse"
    assert len(alert.members) >= 50 and "pin the runner" in event.note
    # no clock series is investigated (what noise leaves elsewhere may be) or published
    assert not [r for r in second.records
                if any(metrics.moves_with_runner(f"{m.benchmark}{m.params}") for m in r.symptoms)]
    assert second.published == []


def test_a_reported_culprit_whose_report_is_missing_is_published_again_and_says_why():
    symptom = lifecycle.Symptom(kind="device_time", benchmark="b.time_x", params="()", machine="m",
                                env="e", ratio=1.5, ci=(1.4, 1.6))

    def record(alert_id: int, culprit: str) -> lifecycle.AlertRecord:
        return lifecycle.AlertRecord(id=alert_id, kind="device_time", good_commit="g" * 40,
                                     bad_commit=culprit, symptoms=(symptom,),
                                     status="reported", culprit=culprit)

    records = [record(1, "a" * 40), record(2, "b" * 40), record(3, "c" * 40)]
    extras: dict[int, dict] = {1: {"report": None}, 2: {"report": "reports/b"},
                               3: {"report": "reports/c"}}
    on_disk = {"reports/c"}  # b's bundle was deleted, or its writing never finished
    due = night.unpublished(records, extras, set(), on_disk.__contains__)
    assert [g.culprit[0] for g in due] == ["a", "b"]
    assert night.missing_reports([1, 2, 3], extras, on_disk.__contains__) == {
        1: "its report was never written (an earlier run stopped first)",
        2: "its report reports/b is not on disk"}
    # tonight's investigation publishes its culprit whatever the disk holds
    assert [g.culprit[0] for g in night.unpublished(records, extras, {3}, lambda _: True)] \
        == ["a", "c"]


def test_a_night_times_its_phases_and_may_measure_nothing_again():
    """`NightResult.phases`: the seconds of each step on the night's timer, in the order they
    ran (what the demo prints); `Settings.rounds=0` detects once and re-measures nothing."""
    branch = Branch(seed=0, suite=month.suite(), commits=[f"{i:040x}" for i in range(18)],
                    nights=[(0, 17)],
                    events=derate(7, 99)[:1], stride=3)
    seams = (simulation.SyntheticBench(branch), simulation.MemoryRecords(),
             simulation.BranchInvestigations(branch))
    ticks = itertools.count()
    tonight = night.run_night([branch.commits[c] for c in branch.benchmarked(0)],
                              branch.commits, *seams, lambda: "night 1",
                              settings=night.Settings(rounds=0),
                              timer=lambda: float(next(ticks)))
    assert tonight.remeasurement.requests == [] and tonight.investigated
    investigations = [f"investigate alert {i} ({tonight.records[0].kind})"
                      for i in tonight.investigated]
    assert list(tonight.phases) == ["benchmark", "detect", *investigations, "check at head",
                                    "publish"]
    assert all(seconds >= 0 for seconds in tonight.phases.values())
