"""From an alert to an explanation: bisect the commit, the stage and the knob, minimize, time.

Each step measures in a subprocess inside the commit under test (`runner.run_probe`), with
today's benchmark suite and workload catalogue, and the results come back as plain data for
`reports.write_bundle`. The `Investigator` holds what the steps share: the repository, the
cached checkouts, a copy of the current benchmark suite and the asv results store.
"""

from __future__ import annotations

import ast
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regressions import bisect, git, minimize, runner, stages, store
from regressions.errors import SpyreRegressError

FORMAT_VERSION = 1
# The reproducers' measurement code; probes load it by path so report and probe agree.
HARNESS = Path(__file__).resolve().parents[1] / "reports" / "harness.py"
WORKTREE_ENV = "worktree-probe"  # env name of bisection measurements in the results store
RESTORED = 0.75  # a knob restores the metric when it recovers 75% of the regression
SCOPE_LIMITS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Target:
    """What one benchmark of the suite measures, as the probes need it."""

    benchmark: str
    params: tuple[str, ...]  # asv's repr strings, in param order
    workload: str
    seq: int
    width: int | None
    metric: str  # device_time | host_time | compile_time | numerics
    stage: str | None = None
    error: str | None = None  # numerics: max_abs | max_rel | rmse_ratio

    @property
    def shape(self) -> str:
        return f"seq{self.seq}"


def parse_params(text: str) -> tuple[str, ...]:
    """detect's "('mlp', 127)" back to asv's repr strings ("'mlp'", "127")."""
    if not text:
        return ()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise SpyreRegressError(f"cannot read params {text!r}; give them as detect prints "
                                "them, e.g. \"('mlp', 127)\"") from None
    values = value if isinstance(value, tuple) else (value,)
    return tuple(repr(v) for v in values)


def target_for(benchmark: str, params: tuple[str, ...], param_names: tuple[str, ...],
               numerics_widths: dict[str, int]) -> Target:
    values = dict(zip(param_names, (ast.literal_eval(p) for p in params), strict=True))
    workload, seq = values.get("workload"), values.get("seq")
    if workload is None or seq is None:
        raise SpyreRegressError(f"{benchmark}{params}: the probe needs 'workload' and 'seq' "
                                f"parameters; this benchmark has {list(param_names)}")
    name = benchmark.lower()
    if "numerics" in name:
        error = "max_abs" if "max_abs" in name else "max_rel" if "max_rel" in name \
            else "rmse_ratio"
        return Target(benchmark, params, workload, int(seq), numerics_widths.get(workload),
                      "numerics", None, error)
    if "compile" in name:
        return Target(benchmark, params, workload, int(seq), None, "compile_time",
                      values.get("stage"))
    if "host" in name:
        return Target(benchmark, params, workload, int(seq), None, "host_time")
    return Target(benchmark, params, workload, int(seq), None, "device_time")


class Investigator:
    def __init__(self, repo: Path, work_dir: Path, results_dir: Path | None = None,
                 machine: str = "bisect", progress: Progress = lambda _: None,
                 env: dict[str, str] | None = None) -> None:
        self.repo = Path(repo).resolve()
        self.env = dict(env or {})  # for every probe, e.g. the benchmark grid
        self.work_dir = Path(work_dir).resolve()
        self.results_dir = results_dir
        self.machine = machine
        self.progress = progress
        self.checkouts = runner.Checkouts(self.repo, self.work_dir / "checkouts")
        suite_source = self.repo / "benchmarks"
        if not (suite_source / "workloads.py").exists():
            raise SpyreRegressError(f"{suite_source} has no workloads.py: point --repo at a "
                                    "checkout with the benchmark suite and workload catalogue")
        self.suite = self.work_dir / "suite" / "benchmarks"
        if self.suite.exists():
            shutil.rmtree(self.suite)
        shutil.copytree(suite_source, self.suite,
                        ignore=shutil.ignore_patterns("__pycache__"))
        self.workloads = self.suite / "workloads.py"

    # -- shared probe request -------------------------------------------------------------
    def request(self, target: Target, **extra: Any) -> dict:
        config = {"numerics": target.metric == "numerics"}
        request = {"workloads": str(self.workloads), "harness": str(HARNESS),
                   "workload": target.workload,
                   "seq": target.seq, "width": target.width, "config": config,
                   "metric": "device_time" if target.metric == "host_time" else target.metric,
                   "stage": target.stage, "error": target.error}
        request.update(extra)
        return request

    # -- 1. commit bisection ------------------------------------------------------------
    def measure(self, target: Target) -> bisect.Measure:
        def measure(commit: str) -> bisect.Measurement:
            started = time.monotonic()
            answer = runner.run_probe(self.checkouts.path(commit), "bench", {
                "suite": str(self.suite), "benchmark": target.benchmark,
                "params": list(target.params)}, env=self.env)
            self.progress(f"measured {commit[:10]}: {answer['status']} "
                          f"({len(answer.get('samples', []))} samples, "
                          f"{time.monotonic() - started:.1f} s)")
            if answer["status"] != "ok":
                return bisect.Measurement(commit, answer["status"],
                                          detail=answer.get("detail", ""))
            if self.results_dir is not None:
                info = git.commit_info(self.repo, commit)
                params = [list(p) for p in answer.get("param_lists", [])]
                store.record_measurement(
                    self.results_dir, self.machine, WORKTREE_ENV, commit,
                    int(info.date.timestamp() * 1000), target.benchmark, answer["param_index"],
                    answer["combos"], params, answer["samples"], answer["deterministic"],
                    answer.get("benchmark_version"))
            return bisect.Measurement(commit, "ok", tuple(answer["samples"]),
                                      bool(answer["deterministic"]))
        return measure

    def bisect(self, good: str, bad: str, target: Target) -> bisect.BisectResult:
        commits = git.first_parent_history(self.repo, bad, good)
        commits = [git.resolve(self.repo, good)] + commits
        if len(commits) < 2:
            raise SpyreRegressError(f"{bad} is not a descendant of {good} on the first-parent "
                                    "chain; pass the older commit as --good")
        self.progress(f"bisecting {len(commits) - 1} commits between {good[:10]} and "
                      f"{bad[:10]} on {target.benchmark}{target.params}")
        return bisect.bisect_commits(commits, self.measure(target))

    # -- 2. stage bisection --------------------------------------------------------------
    def stage_probe(self, commit: str, target: Target) -> tuple[dict, stages.Capture]:
        capture_root = self.work_dir / "captures" / f"{commit[:12]}-{target.workload}-" \
                                                    f"{target.seq}"
        if capture_root.exists():
            shutil.rmtree(capture_root)
        answer = runner.run_probe(self.checkouts.path(commit), "stages",
                                  self.request(target, capture_dir=str(capture_root)),
                                  env=self.env)
        if answer["status"] != "ok":
            raise SpyreRegressError(f"the stage probe failed at {commit[:12]}: "
                                    f"{answer.get('detail')}")
        return answer, store.load_capture(store.single_capture(capture_root))

    def stages(self, good: str, bad: str, target: Target) -> stages.StageReport:
        self.progress(f"capturing stages at {good[:10]} (good) and {bad[:10]} (bad)")
        with ThreadPoolExecutor(2) as pool:
            good_future = pool.submit(self.stage_probe, good, target)
            bad_future = pool.submit(self.stage_probe, bad, target)
            (good_probe, good_capture), (bad_probe, bad_capture) = \
                good_future.result(), bad_future.result()
        return stages.bisect_stages(good_capture, bad_capture, good_probe, bad_probe, good, bad,
                                    target.workload, target.shape)

    # -- 3. knob bisection ---------------------------------------------------------------
    def knobs(self, bad: str, target: Target, good_metric: float) -> dict | None:
        self.progress(f"toggling compiler knobs at {bad[:10]}")
        checkout = self.checkouts.path(bad)
        answer = runner.run_probe(checkout, "knobs", self.request(target), env=self.env)
        if answer["status"] != "ok":
            self.progress(f"knob probe failed: {answer.get('detail')}")
            return None
        bad_metric = answer["baseline"]
        spread = bad_metric - good_metric
        if spread <= 0:
            return None
        best = max(answer["trials"], key=lambda t: (bad_metric - t["metric"]) / spread)
        recovered = (bad_metric - best["metric"]) / spread
        if recovered < RESTORED:
            return {"knob": None, "trials": answer["trials"], "metric_bad": bad_metric,
                    "metric_good": good_metric}
        scoped = runner.run_probe(checkout, "knobs", self.request(
            target, scope={"knob": best["knob"], "value": best["value"],
                           "limits": list(SCOPE_LIMITS)}), env=self.env)
        decisive = None
        if scoped["status"] == "ok":
            for entry in scoped["scoped"]:
                if entry["limit"] and (bad_metric - entry["metric"]) / spread >= RESTORED:
                    applications = entry["applications"]
                    decisive = applications[entry["limit"] - 1] if len(applications) >= \
                        entry["limit"] else None
                    break
        return {"knob": best["knob"], "value": best["value"], "stage": best["stage"],
                "metric_bad": bad_metric, "metric_with_knob": best["metric"],
                "metric_good": good_metric, "recovered": recovered,
                "decisive_application": decisive, "trials": answer["trials"]}

    # -- 4. minimization -----------------------------------------------------------------
    def full_candidate(self, target: Target) -> minimize.Candidate:
        import importlib.util

        import spyre_sim

        spec = importlib.util.spec_from_file_location("spyre_regress_workloads", self.workloads)
        catalogue = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = catalogue  # dataclasses look their module up here
        spec.loader.exec_module(catalogue)
        program, inputs = catalogue.build(target.workload, target.seq, target.width)
        graph = spyre_sim.capture(program, inputs).graphs[0]
        return minimize.from_graph(graph.graph_module, graph.example_inputs)

    def minimize(self, good: str, bad: str, target: Target,
                 candidate: minimize.Candidate) -> minimize.MinimizeResult | None:
        if target.metric not in ("device_time", "numerics"):
            return None
        request = self.request(target)
        request["config"] = {**request["config"], "noise_cv": 0.0}
        workers = [runner.Worker(self.checkouts.path(c), request, self.env)
                   for c in (good, bad)]

        def ratio_of(source: str) -> float | None:
            with ThreadPoolExecutor(2) as pool:
                good_answer, bad_answer = pool.map(lambda w: w.ask({"source": source}),
                                                   workers)
            if good_answer["status"] != "ok" or bad_answer["status"] != "ok":
                return None
            if good_answer["metric"] <= 0:
                return None
            return bad_answer["metric"] / good_answer["metric"]

        try:
            full = ratio_of(minimize.to_source(candidate))
            if full is None or full <= 1.0:
                self.progress("minimization skipped: the full program shows no regression")
                return None
            threshold = 1 + 0.5 * (full - 1)
            self.progress(f"minimizing {candidate.op_count} ops (ratio {full:.3f}, keep "
                          f">= {threshold:.3f})")
            return minimize.minimize(candidate, ratio_of, threshold, self.progress)
        finally:
            for worker in workers:
                worker.close()

    # -- 5. timing for the report --------------------------------------------------------
    def timing(self, commit: str, target: Target, source: str, trace: Path,
               iterations: int = 100) -> dict:
        request = self.request(target, source=source, iterations=iterations, trace=str(trace))
        request["config"] = {"noise_seed": None}  # independent run-to-run noise per build
        answer = runner.run_probe(self.checkouts.path(commit), "timing", request, env=self.env)
        if answer["status"] != "ok":
            raise SpyreRegressError(f"the timing probe failed at {commit[:12]}: "
                                    f"{answer.get('detail')}")
        return answer


def describe_commit(repo: Path, sha: str | None) -> dict | None:
    if sha is None:
        return None
    info = git.commit_info(repo, sha)
    return {"sha": info.sha, "subject": info.subject, "date": info.date.isoformat()}


def investigate(investigator: Investigator, alert: dict, param_names: dict[str, tuple],
                numerics_widths: dict[str, int], out_dir: Path) -> dict:
    """Every step for one alert; returns the investigation document reports render."""
    probe = alert["probe"]
    benchmark = probe["benchmark"]
    target = target_for(benchmark, parse_params(probe["params"]), param_names[benchmark],
                        numerics_widths)
    repo = investigator.repo
    good, bad = git.resolve(repo, alert["good_commit"]), git.resolve(repo, alert["bad_commit"])
    result = investigator.bisect(good, bad, target)
    culprit = result.culprit
    if culprit is None:
        raise SpyreRegressError(f"bisection between {good[:10]} and {bad[:10]} named no single "
                                f"culprit (candidates: {[c[:10] for c in result.candidates]})")
    culprit_parent = git.resolve(repo, f"{culprit}~1")
    report = investigator.stages(culprit_parent, culprit, target)
    metric_good = good_metric(report, target)
    workaround = investigator.knobs(culprit, target, metric_good) if metric_good is not None \
        else None
    candidate = investigator.full_candidate(target)
    minimized = investigator.minimize(culprit_parent, culprit, target, candidate)
    source = minimized.source if minimized else minimize.to_source(candidate,
                                                                  "The probe program.")
    out_dir.mkdir(parents=True, exist_ok=True)
    traces = {"good": out_dir / "trace_good.json", "bad": out_dir / "trace_bad.json"}
    investigator.progress("timing 100 synchronized iterations at the good and the bad build")
    timing = {name: investigator.timing(commit, target, source, traces[name])
              for name, commit in (("good", culprit_parent), ("bad", culprit))}
    return {
        "version": FORMAT_VERSION,
        "alert": alert,
        "metric": "device_time" if target.metric == "host_time" else target.metric,
        "commits": {"good": describe_commit(repo, culprit_parent),
                    "bad": describe_commit(repo, culprit),
                    "culprit": describe_commit(repo, culprit)},
        "bisect": result.to_dict(),
        "stages": report.to_dict(),
        "workaround": workaround if workaround and workaround.get("knob") else None,
        "minimized": ({**minimized.to_dict(), "source": minimized.source} if minimized else
                      {"source": source, "ops_before": candidate.op_count,
                       "ops_after": candidate.op_count, "queries": 0, "ratio_before": None,
                       "ratio_after": None}),
        "probe": {"workload": target.workload, "seq": target.seq, "width": target.width,
                  "benchmark": target.benchmark, "params": list(target.params),
                  "config": timing["bad"].get("config", {})},
        "timing": timing,
        "traces": {k: str(v) for k, v in traces.items()},
    }


def good_metric(report: stages.StageReport, target: Target) -> float | None:
    """The good build's metric, from the stage probe (the knob probe measures the same way)."""
    if target.metric == "numerics":
        return report.numerics.get("good", {}).get("runtime", {}).get(target.error)
    if target.metric == "compile_time":
        times = {d.stage: d.compile_s_good for d in report.stages}
        return times[target.stage] if target.stage else sum(times.values())
    return report.device_time_us["good"]

