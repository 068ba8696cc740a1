"""asv result documents (results format version 2), built in one place.

asv's own runs write these files; the tool writes them too - bisection measurements in a
store of their own (`record_measurement`), the synthetic stores of the ground truth - and
every writer goes through `new_document`, `new_row` and `set_result`, so there is one list
of columns and one way to fill them. The format is asv's (docs/source/dev.rst, "Benchmark
suite layout and file formats"): `results/<machine>/<sha[:8]>-<env>.json`, each benchmark a
row aligned to `result_columns`, each cell a list over the cartesian product of its params.

Every asv file the records read (a result document, `machine.json`, `benchmarks.json`) is
opened by `open_document`, with one policy for one that cannot be read: it raises
`UnreadableDocument`, naming the file and why, and nothing is lost for it. A reader of a
store leaves the file out, as asv does, and the read of its series says so once
(`result_columns.log_skipped`); a reader that cannot go on without it (the benchmark list
an investigation names parameters from) stops with that message; a write into the file or a
merge of it refuses, so nothing is written over.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regressions.errors import SpyreRegressError
from regressions.probing.protocol import BenchAnswer
from regressions.records.files import write_json, write_text

ASV_RESULTS_VERSION = 2  # asv.results.Results.api_version
RESULT_COLUMNS = ("result", "params", "version", "started_at", "duration", "stats_ci_99_a",
                  "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
                  "samples", "profile")
_TIMED_TYPES = frozenset({"time", "timeraw"})
_STATS = ("stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number",
          "stats_repeat")


class UnreadableDocument(SpyreRegressError):
    """An asv file that cannot be read as the JSON object asv writes (`path`, `why`)."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


def open_document(path: Path) -> dict[str, Any]:
    """The JSON object of one asv file: the one way the records open one.

    Raises:
        UnreadableDocument: missing or unreadable, not JSON, or not a JSON object.
    """
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UnreadableDocument(path, "does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise UnreadableDocument(path, f"not readable JSON ({error})") from None
    if not isinstance(document, dict):
        raise UnreadableDocument(path, "not an asv JSON document (not a JSON object)")
    return document


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


def record_measurement(results_dir: Path, *, machine: str, env_name: str, commit: str,
                       commit_date_ms: int, benchmark: str, measured: BenchAnswer) -> Path:
    """Merge one measurement of `benchmark` (at the parameter combination it names) into
    `results/<machine>/<commit8>-<env>.json`.

    Combinations not measured stay NaN (asv's "skipped"), so readers see exactly what ran.

    Raises:
        UnreadableDocument: the file is there but cannot be read (it is not written over).
    """
    path = result_path(results_dir, machine, commit, env_name)
    document = open_document(path) if path.exists() else new_document(
        commit, env_name, commit_date_ms, machine)
    row = document["results"].get(benchmark) or new_row(measured.param_lists,
                                                        measured.benchmark_version)
    if len(row[0]) != measured.combos:
        raise ValueError(f"{benchmark}: {measured.combos} parameter combinations, but its "
                         f"params {[list(p) for p in measured.param_lists]} give {len(row[0])}")
    set_result(row, measured.param_index, measured.samples, timed=not measured.deterministic,
               started_at=int(time.time() * 1000))
    document["results"][benchmark] = row
    write_text(path, json.dumps(document, allow_nan=True) + "\n")
    machine_file = Path(results_dir) / machine / "machine.json"
    if not machine_file.exists():
        write_json(machine_file, {"machine": machine, "version": 1})
    return path


# --- merging result documents from many runs (asv has no tool for it: asv issue #1362) ----

class MergeRefused(ValueError):
    """Two documents that must not be merged; the message names the file and the field."""


def merge_document(into: dict | None, new: dict, source: str) -> dict:
    """`new`'s results added to `into`, two result documents of one commit, environment and
    machine: benchmarks only one holds are kept as they are, a benchmark both hold gets the
    new samples appended and its statistics recomputed over all of them (as asv run
    --append-samples does; a `track_` value or a failure is replaced). A row whose
    `started_at` equals the stored one is the same run, merged before, and changes nothing.

    Raises:
        MergeRefused: the machine's params, the commit or environment, or a benchmark's
            version differ (`source` names the new document in the message).
    """
    if new.get("version") != ASV_RESULTS_VERSION:
        raise MergeRefused(f"{source}: results format `version` {new.get('version')!r}; "
                           f"merging reads version {ASV_RESULTS_VERSION} (run `asv update`)")
    if into is None:
        return json.loads(json.dumps(new))
    for key in ("commit_hash", "env_name"):
        if into.get(key) != new.get(key):
            raise MergeRefused(f"{source}: `{key}` is {new.get(key)!r}, the store has "
                               f"{into.get(key)!r}")
    for key in sorted(set(into.get("params", {})) | set(new.get("params", {}))):
        if into["params"].get(key) != new["params"].get(key):
            raise MergeRefused(f"{source}: machine param `params.{key}` is "
                               f"{new['params'].get(key)!r}, the store has "
                               f"{into['params'].get(key)!r}; results of different machines "
                               "belong under different machine names")
    merged = json.loads(json.dumps(into))
    stored_columns, new_columns = merged["result_columns"], new["result_columns"]
    for name, row in new["results"].items():
        cells = dict(zip(new_columns, row, strict=False))
        old = merged["results"].get(name)
        if old is None:
            merged["results"][name] = [cells.get(c) for c in stored_columns]
            continue
        old_cells = dict(zip(stored_columns, old, strict=False))
        if old_cells.get("version") != cells.get("version"):
            raise MergeRefused(f"{source}: benchmark {name} has `version` "
                               f"{cells.get('version')!r}, the store has "
                               f"{old_cells.get('version')!r}: they measure different code")
        if old_cells.get("started_at") == cells.get("started_at"):
            continue
        merged["results"][name] = [_appended(old_cells, cells).get(c) for c in stored_columns]
    merged["durations"] = {**merged.get("durations", {}), **new.get("durations", {})}
    return merged


def _appended(old: dict, new: dict) -> dict:
    """One benchmark's row with a later run's combinations added to it."""
    combos = len(new.get("result") or old.get("result") or [])
    out: dict[str, Any] = {column: _cell_list(old, column, combos)
                           for column in ("result", *_STATS, "samples")}
    out.update(params=old.get("params"), version=old.get("version"),
               started_at=new.get("started_at"), duration=new.get("duration"), profile=None)
    for index in range(combos):
        value = _cell(new, "result", index)
        if isinstance(value, float) and math.isnan(value):
            continue  # not run this time: the stored value stands
        samples = _cell(new, "samples", index)
        if value is None or samples is None:  # a failure, or a value asv keeps alone
            out["result"][index] = value
            out["samples"][index] = None
            for name in _STATS:
                out[name][index] = _cell(new, name, index)
            continue
        _set_cells(out, index, [*(_cell(old, "samples", index) or []), *samples])
    return out


def _set_cells(cells: dict, index: int, samples: Sequence[float]) -> None:
    median, low, high, q25, q75 = _stats(samples)
    cells["result"][index] = median
    for name, value in zip(_STATS, (low, high, q25, q75, 1, len(samples)), strict=True):
        cells[name][index] = value
    cells["samples"][index] = [float(s) for s in samples]


def _cell(cells: dict, column: str, index: int) -> Any:
    values = cells.get(column)
    return values[index] if isinstance(values, list) and index < len(values) else None


def _cell_list(cells: dict, column: str, combos: int) -> list:
    values = cells.get(column)
    return list(values) if isinstance(values, list) else [None] * combos


@dataclass(frozen=True)
class Store:
    """An asv results directory read into memory: what one shard, worker or run wrote."""

    source: str  # where it was read, for messages
    benchmarks: dict
    machines: dict[str, dict]  # machine name -> machine.json
    results: dict[tuple[str, str], dict]  # (machine, file name) -> result document


@dataclass(frozen=True)
class Merged:
    """What a merge wrote: result files (new or changed), and the machines."""

    files: tuple[Path, ...]
    machines: tuple[str, ...]


def read_store(path: Path) -> Store:
    """The results directory `path` (benchmarks.json, one folder per machine)."""
    path = Path(path)
    listed = path / "benchmarks.json"
    if not listed.is_file():
        raise MergeRefused(f"{path} has no benchmarks.json: pass a results directory asv "
                           "wrote (`results_dir`)")
    machines, results = {}, {}
    for folder in sorted(d for d in path.iterdir() if d.is_dir()):
        machine_file = folder / "machine.json"
        machines[folder.name] = _read(machine_file) if machine_file.is_file() else \
            {"machine": folder.name, "version": 1}
        for file in sorted(folder.glob("*.json")):
            if file.name != "machine.json":
                results[folder.name, file.name] = _read(file)
    return Store(str(path), _read(listed), machines, results)


def merge_into(into: Path, stores: Sequence[Store]) -> Merged:
    """`stores` merged into the results directory `into`: `benchmarks.json` as the union of
    the benchmark lists, each machine's `machine.json`, each result document through
    `merge_document`. Everything is checked before anything is written, so a refusal
    leaves `into` as it was.

    Raises:
        MergeRefused: a document, a machine or a benchmark's version that does not match.
    """
    into = Path(into)
    stored = into / "benchmarks.json"
    benchmarks = _read(stored) if stored.is_file() else {}
    machines: dict[str, dict] = {}
    pending: dict[Path, dict] = {}
    for store in stores:
        benchmarks = _merged_benchmarks(benchmarks, store.benchmarks, store.source)
        for name, machine in store.machines.items():
            existing = into / name / "machine.json"
            known = machines.get(name) or (_read(existing) if existing.is_file() else None)
            if known is not None and known != machine:
                raise MergeRefused(f"{store.source}: machine {name!r} is described "
                                   f"differently from the store's {existing}: name the "
                                   "machines apart")
            machines[name] = machine
        for (name, file), document in store.results.items():
            target = into / name / file
            base = pending.get(target) or (_read(target) if target.is_file() else None)
            pending[target] = merge_document(base, document, f"{store.source}/{name}/{file}")
    for name, machine in machines.items():
        write_json(into / name / "machine.json", machine)
    for target, document in pending.items():
        write_text(target, json.dumps(document, allow_nan=True) + "\n")
    write_json(stored, benchmarks)
    return Merged(tuple(pending), tuple(machines))


def _merged_benchmarks(known: dict, new: dict, source: str) -> dict:
    for name, entry in new.items():
        if not isinstance(entry, dict) or name not in known:
            continue
        if known[name].get("version") != entry.get("version"):
            raise MergeRefused(f"{source}: benchmark {name} has `version` "
                               f"{entry.get('version')!r}, the store has "
                               f"{known[name].get('version')!r}: the shards ran different "
                               "benchmark suites")
    return {**known, **new}


def _read(path: Path) -> dict:
    """A file a merge reads (`open_document`): one it cannot read refuses the merge."""
    try:
        return open_document(path)
    except UnreadableDocument as error:
        raise MergeRefused(str(error)) from None
