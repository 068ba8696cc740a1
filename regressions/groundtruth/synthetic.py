"""Ground truth for the detector: seeded step series, a scorer, and asv-format documents.

The panel: 60 commits x 10 samples, 3% lognormal noise, +4% at commit 37 and +1.5% at
commit 50: a step the detector finds easily and one at the edge of what 10 samples per
commit can locate. `StepRemeasure` serves re-measurement from the same model. Generators
return plain lists; the asv builders return JSON documents keyed by relative path and leave
writing them to the caller.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from regressions.records import asv_documents

PANEL_STEPS: tuple[tuple[int, float], ...] = ((37, 0.04), (50, 0.015))
PANEL_COMMITS = 60
PANEL_SAMPLES = 10
PANEL_NOISE = 0.03


def step_series(
    *,
    seed: int,
    n_commits: int = PANEL_COMMITS,
    n_samples: int = PANEL_SAMPLES,
    noise: float = PANEL_NOISE,
    steps: Sequence[tuple[int, float]] = PANEL_STEPS,
) -> tuple[list[list[float]], list[int]]:
    """One series of per-commit samples and its true change indexes.

    Each step `(index, size)` multiplies the level from `index` on by `1 + size`; samples
    are lognormal around the level with log-sd `noise`.
    """
    rng = np.random.default_rng(seed)
    level = np.ones(n_commits)
    for index, size in steps:
        level[index:] *= 1 + size
    samples = level[:, None] * np.exp(rng.normal(0.0, noise, (n_commits, n_samples)))
    return samples.tolist(), [index for index, _ in steps]


def step_panel(
    n_series: int, *, seed: int = 0, steps: Sequence[tuple[int, float]] = PANEL_STEPS, **kw
) -> list[tuple[list[list[float]], list[int]]]:
    """`n_series` independent `step_series`, seeded `seed`, `seed + 1`, ...; `steps=()` gives
    the no-change panel."""
    return [step_series(seed=seed + i, steps=steps, **kw) for i in range(n_series)]


class StepRemeasure:
    """Fresh samples for the step series of a panel: a re-measurement served from the same
    generator (`remeasure.Measure`). Series are keyed by their params string; each call
    draws from its own stream, so repeating a request gives new samples."""

    def __init__(self, steps: Mapping[str, Sequence[tuple[int, float]]], *, seed: int,
                 noise: float = PANEL_NOISE):
        self.steps = {key: tuple(value) for key, value in steps.items()}
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.samples = 0

    def level(self, params: str, commit: int) -> float:
        return math.prod(1 + size for index, size in self.steps[params] if commit >= index)

    def __call__(self, requests) -> list[list[float]]:
        out = []
        for r in requests:
            level = self.level(r.params, int(r.commit, 16))
            out.append((level * np.exp(self.rng.normal(0.0, self.noise, r.samples))).tolist())
            self.samples += r.samples
        return out


def precision_recall(true: Sequence[int], found: Sequence[int], margin: int) -> tuple[float, float]:
    """Share of `found` within `margin` (inclusive) of a true change, and of `true` found.

    As ruptures.metrics.precision_recall, but on change indexes without the trailing series
    length, with an inclusive margin, and each found point matching at most one true one.
    Empty inputs score 1.0 (nothing claimed, nothing to find).
    """
    unused = list(found)
    hits = 0
    for t in true:
        match = next((f for f in unused if abs(f - t) <= margin), None)
        if match is not None:
            unused.remove(match)
            hits += 1
    precision = hits / len(found) if found else 1.0
    recall = hits / len(true) if true else 1.0
    return precision, recall


@dataclass(frozen=True, kw_only=True)
class BenchmarkHistory:
    """What one asv benchmark measured at each commit, for `asv_results_documents`.

    `samples[c][j]` is the sample list at commit `c` for the `j`-th combination of `params`
    (asv order, the cartesian product): None means it failed, [] that it was skipped.
    """

    samples: Sequence[Sequence[Sequence[float] | None]]
    params: tuple[tuple[str, ...], ...] = ()
    unit: str = "seconds"
    type: str = "time"
    record_samples: bool = True
    higher_is_better: bool = False  # as a benchmark declares it (asv copies the attribute)


def asv_results_documents(
    commits: Sequence[tuple[str, int]],
    benchmarks: Mapping[str, BenchmarkHistory],
    *,
    machine: str = "synthetic",
    env: str = "virtualenv-py3.11",
    machine_params: Mapping[str, str] | None = None,
) -> dict[str, dict]:
    """asv results (format version 2, asv docs/source/dev.rst) for `(sha, date_ms)` commits,
    written by `records.asv_documents` as every other writer of the tool writes them.

    Returns {relative path: JSON document}: benchmarks.json, <machine>/machine.json and one
    <machine>/<sha[:8]>-<env>.json per commit, as `asv run --record-samples` lays them out.
    `machine_params` (cpu, ram, os, ...) go into every result file, as asv records them.
    """
    docs: dict[str, dict] = {
        "benchmarks.json": {
            "version": 2,
            **{
                name: {"name": name, "type": b.type, "unit": b.unit, "version": "1",
                       "params": [list(p) for p in b.params],
                       "param_names": [f"p{i}" for i in range(len(b.params))],
                       **({"higher_is_better": True} if b.higher_is_better else {})}
                for name, b in benchmarks.items()
            },
        },
        f"{machine}/machine.json": {"machine": machine, "version": 1},
    }
    for c, (sha, date) in enumerate(commits):
        document = asv_documents.new_document(sha, env, date, machine, params=machine_params,
                                              python="3.11")
        for name, b in benchmarks.items():
            row = asv_documents.new_row(b.params, "1")
            for index, samples in enumerate(b.samples[c]):
                if samples is None or len(samples):  # [] stays skipped (NaN)
                    asv_documents.set_result(row, index, samples,
                                             timed=asv_documents.has_samples(b.type),
                                             record_samples=b.record_samples)
            document["results"][name] = row
        docs[asv_documents.result_path(Path(), machine, sha, env).as_posix()] = document
    return docs


def asv_format_1(document: dict) -> dict:
    """A results document of format version 2 as asv before 0.5 wrote it (format 1, asv's
    `Results.update_to_2` read backwards): one dict per benchmark holding `result`, `params`,
    `stats` (a dict per combination with `ci_99`, `q_25`, `q_75`, `number`, `repeat`; None
    where nothing was measured) and `samples` where recorded, and the benchmark versions
    and start times in tables of their own. What a reader must migrate as asv does."""
    columns = document["result_columns"]
    results, versions, started = {}, {}, {}
    for name, row in document["results"].items():
        cells = dict(zip(columns, row, strict=False))
        values = cells["result"]
        entry: dict = {"result": values, "params": cells["params"]}
        stats = [_stats_1(cells, i) for i in range(len(values))]
        if any(s is not None for s in stats):
            entry["stats"] = stats
        if any(s is not None for s in cells.get("samples") or ()):
            entry["samples"] = cells["samples"]
        results[name] = entry
        versions[name] = cells["version"]
        if cells.get("started_at") is not None:
            started[name] = cells["started_at"]
    return {"commit_hash": document["commit_hash"], "env_name": document["env_name"],
            "date": document["date"], "params": document["params"],
            "python": document["python"], "requirements": document["requirements"],
            "results": results, "benchmark_version": versions, "started_at": started,
            "ended_at": {}, "profiles": {}, "version": 1}


def _stats_1(cells: dict, i: int) -> dict | None:
    low, high = cells["stats_ci_99_a"][i], cells["stats_ci_99_b"][i]
    if not (isinstance(low, float) and math.isfinite(low)):
        return None
    return {"ci_99": [low, high], "q_25": cells["stats_q_25"][i],
            "q_75": cells["stats_q_75"][i], "number": cells["stats_number"][i],
            "repeat": cells["stats_repeat"][i]}


def recovery_store(commits: int = 40, *, seed: int = 0, format_version: int = 1
                   ) -> dict[str, dict]:
    """A small asv store (one machine, one env; one value and its statistics per point, as
    format-1 stores and runs without --record-samples keep them) of three timing series
    with 3% noise over `commits` commits: `Stays.time_run` x1.3 from the middle on, still
    there at the newest commit; `Recovers.time_run` x1.4 from a quarter in, back from three
    quarters on (a regression since fixed); `Flat.time_run` unchanged. Format 1 by default
    (`asv_format_1`), as asv before 0.5 wrote; 2 otherwise."""
    rng = np.random.default_rng(seed)
    middle, quarter, back = commits // 2, commits // 4, 3 * commits // 4

    def history(level) -> BenchmarkHistory:
        return BenchmarkHistory(samples=[[[float(x) for x in level(c) * rng.lognormal(0, 0.03, 10)]]
                                         for c in range(commits)], record_samples=False)

    benchmarks = {
        "bench_suite.Stays.time_run": history(lambda c: 1.3 if c >= middle else 1.0),
        "bench_suite.Recovers.time_run": history(
            lambda c: 1.4 if quarter <= c < back else 1.0),
        "bench_suite.Flat.time_run": history(lambda c: 1.0),
    }
    shas = [(f"{c + 1:08x}" + "ab" * 16, 1_600_000_000_000 + c * 86_400_000)
            for c in range(commits)]
    docs = asv_results_documents(shas, benchmarks, machine="oldbox", env="virtualenv-py3.8")
    if format_version == 1:
        docs = {path: asv_format_1(doc) if "result_columns" in doc else doc
                for path, doc in docs.items()}
    return docs
