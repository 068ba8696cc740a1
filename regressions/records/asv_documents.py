"""asv result documents (results format version 2), built in one place.

asv's own runs write these files; the tool writes them too - bisection measurements in a
store of their own (`record_measurement`), the synthetic stores of the ground truth - and
every writer goes through `new_document`, `new_row` and `set_result`, so there is one list
of columns and one way to fill them. The format is asv's (docs/source/dev.rst, "Benchmark
suite layout and file formats"): `results/<machine>/<sha[:8]>-<env>.json`, each benchmark a
row aligned to `result_columns`, each cell a list over the cartesian product of its params.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from regressions.records.files import write_json, write_text

ASV_RESULTS_VERSION = 2  # asv.results.Results.api_version
RESULT_COLUMNS = ("result", "params", "version", "started_at", "duration", "stats_ci_99_a",
                  "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
                  "samples", "profile")
_TIMED_TYPES = frozenset({"time", "timeraw"})
_STATS = ("stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number",
          "stats_repeat")


def new_document(commit: str, env_name: str, date_ms: int, machine: str,
                 params: Mapping[str, Any] | None = None, python: str = "") -> dict:
    """An empty results document for one commit and environment; `params` are the machine's
    (cpu, ram, os, ... as `asv machine` records them) beside its name."""
    return {"commit_hash": commit, "env_name": env_name, "date": date_ms,
            "params": {**(params or {}), "machine": machine}, "python": python,
            "requirements": {}, "env_vars": {}, "result_columns": list(RESULT_COLUMNS),
            "results": {}, "durations": {}, "version": ASV_RESULTS_VERSION}


def new_row(params: Sequence[Sequence[str]], version: str | None) -> list:
    """A benchmark's row with every combination of `params` skipped (NaN), as asv leaves
    combinations it did not run."""
    combos = math.prod(len(p) for p in params) if params else 1
    nan = math.nan
    cells: dict[str, Any] = {"result": [nan] * combos, "params": [list(p) for p in params],
                             "version": version, "started_at": None, "duration": None,
                             "samples": [None] * combos, "profile": None}
    cells.update({column: [nan] * combos for column in _STATS})
    return [cells[column] for column in RESULT_COLUMNS]


def set_result(row: list, index: int, samples: Sequence[float] | None, timed: bool = True,
               record_samples: bool = True, started_at: int | None = None) -> None:
    """Combination `index` of `row` measured `samples`: the median, and for a timing
    benchmark (`timed`) asv's statistics and the samples themselves when `record_samples`
    (asv --record-samples; appended to any already there, as --append-samples does). asv
    keeps only the value of a `track_` benchmark. None: the benchmark failed there."""
    column = RESULT_COLUMNS.index
    if samples is None:
        row[column("result")][index] = None
        return
    median, low, high, q25, q75 = _stats(samples)
    row[column("result")][index] = median
    if started_at is not None:
        row[column("started_at")] = started_at
    if not timed:
        return
    for name, value in zip(_STATS, (low, high, q25, q75, 1, len(samples)), strict=True):
        row[column(name)][index] = value
    if record_samples:
        previous = row[column("samples")][index] or []
        row[column("samples")][index] = list(previous) + [float(s) for s in samples]


def _stats(samples: Sequence[float]) -> tuple[float, float, float, float, float]:
    """Median, the 99% range (asv's ci_99 stands for an interval of the median; the 0.5%
    and 99.5% quantiles here) and the quartiles, by linear interpolation."""
    ordered = sorted(samples)

    def quantile(q: float) -> float:
        position = q * (len(ordered) - 1)
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    return quantile(0.5), quantile(0.005), quantile(0.995), quantile(0.25), quantile(0.75)


def has_samples(asv_type: str) -> bool:
    """Whether asv records samples for a benchmark of this type (timing benchmarks do;
    `track_` and memory benchmarks measure one value)."""
    return asv_type in _TIMED_TYPES


def result_path(results_dir: Path, machine: str, commit: str, env_name: str) -> Path:
    """Where asv keeps one commit's results for one environment."""
    return Path(results_dir) / machine / f"{commit[:8]}-{env_name}.json"


def record_measurement(results_dir: Path, machine: str, env_name: str, commit: str,
                       commit_date_ms: int, benchmark: str, param_index: int, combos: int,
                       params: Sequence[Sequence[str]], samples: Sequence[float],
                       deterministic: bool, benchmark_version: str | None) -> Path:
    """Merge one measurement into `results/<machine>/<commit8>-<env>.json`.

    Combinations not measured stay NaN (asv's "skipped"), so readers see exactly what ran.
    """
    path = result_path(results_dir, machine, commit, env_name)
    document = json.loads(path.read_text()) if path.exists() else new_document(
        commit, env_name, commit_date_ms, machine)
    row = document["results"].get(benchmark) or new_row(params, benchmark_version)
    if len(row[0]) != combos:
        raise ValueError(f"{benchmark}: {combos} parameter combinations, but its params "
                         f"{[list(p) for p in params]} give {len(row[0])}")
    set_result(row, param_index, samples, timed=not deterministic,
               started_at=int(time.time() * 1000))
    document["results"][benchmark] = row
    write_text(path, json.dumps(document, allow_nan=True) + "\n")
    machine_file = Path(results_dir) / machine / "machine.json"
    if not machine_file.exists():
        write_json(machine_file, {"machine": machine, "version": 1})
    return path
