"""asv result files read into columns: what `results.load_results` builds its table from.

A public store holds a million result points (500 series x 1,700 commits); read as one dict
per point it took minutes and half a gigabyte. Here each file's rows go straight into
columns: numbers in unboxed arrays, every repeated string (machine, env, benchmark, params,
commit, status, unit, type, version, machine parameters) as an integer code into a table of
its values, samples only where asv recorded them. The table comes out with those columns as
pandas Categoricals, categories in sorted order. The format is asv's (docs/source/dev.rst):
a row's cells align with `result_columns`, each a list over the cartesian product of its
`params`; a null result failed, NaN was skipped.

Format version 1 (asv before 0.5: one dict per benchmark with `result`, `stats`, `samples`)
is read as asv itself reads it: migrated in memory by asv's own `Results.update_to_2`
(asv/results.py, the step `asv update` runs), never written back. A file or row that cannot
be read is recorded in `Columns.skipped` with the reason; the caller says it once
(`skipped_summary`), not once per file: a store of a thousand older files is one line.
"""

from __future__ import annotations

import array
import itertools
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from regressions.detection.environment import describe_settings
from regressions.records.asv_documents import (
    ASV_RESULTS_VERSION,
    UnreadableDocument,
    open_document,
)

log = logging.getLogger(__name__)

COLUMNS = ("machine", "env", "benchmark", "params", "commit", "position", "date", "status",
           "value", "samples", "ci_99_a", "ci_99_b", "q_25", "q_75", "unit", "type",
           "version", "higher_is_better", "settings")
CODED = ("machine", "env", "benchmark", "params", "commit", "status", "unit", "type",
         "version", "settings")
NUMBERS = ("value", "ci_99_a", "ci_99_b", "q_25", "q_75")
STATS = ("ci_99_a", "ci_99_b", "q_25", "q_75")
# asv's benchmark types, by the prefix of the benchmark's name, and what each is read as.
ASV_TYPES = {"timeraw": "time", "time": "time", "track": "track", "peakmem": "peakmem",
             "mem": "mem"}
DEFAULT_UNITS = {"time": "seconds"}


class Columns:
    """Result points, file after file, as coded columns."""

    def __init__(self) -> None:
        self.codes = {c: array.array("i") for c in CODED}
        self.tables: dict[str, dict[Any, int]] = {c: {} for c in CODED}
        self.numbers = {c: array.array("d") for c in NUMBERS}
        self.dates = array.array("d")
        self.better = array.array("b")
        self.samples: dict[int, list] = {}  # point -> samples, where asv recorded them
        self.size = 0
        self.files = 0  # result documents offered, read or not
        self.skipped: list[tuple[str, str]] = []  # (file, why): what was left out

    def code(self, column: str, value: object) -> int:
        """`value`'s code in `column` (-1 for None: a missing value)."""
        if value is None:
            return -1
        table = self.tables[column]
        return table.setdefault(value, len(table))

    def add(self, constants: dict[str, Any], points: dict[str, list]) -> None:
        """One benchmark row of one file: the values its points share, and per point lists."""
        n = len(points["value"])
        for column, value in constants.items():
            if column in self.codes:
                self.codes[column].extend([self.code(column, value)] * n)
        self.dates.extend([float(constants["date"])] * n)
        self.better.extend([constants["higher_is_better"] is True] * n)
        for column in ("params", "status"):
            self.codes[column].extend([self.code(column, v) for v in points[column]])
        for column in NUMBERS:
            values = points[column]
            self.numbers[column].extend(values if None not in values else
                                        [math.nan if v is None else v for v in values])
        if any(s is not None for s in points["samples"]):
            self.samples.update((self.size + i, s) for i, s in enumerate(points["samples"])
                                if s is not None)
        self.size += n

    def frame(self) -> pd.DataFrame:
        """The table (`COLUMNS`, `position` left 0 for the caller), the columns of repeated
        strings as Categoricals whose categories are sorted."""
        data: dict[str, object] = {c: self._categorical(c) for c in CODED}
        data.update({c: np.frombuffer(self.numbers[c], dtype=float) for c in NUMBERS})
        samples = np.full(self.size, None, dtype=object)
        for i, s in self.samples.items():
            samples[i] = s
        data.update(samples=samples, date=np.frombuffer(self.dates, dtype=float),
                    higher_is_better=np.frombuffer(self.better, dtype=np.int8).astype(bool),
                    position=np.zeros(self.size, dtype=np.int64))
        return pd.DataFrame(data, columns=list(COLUMNS))

    def _categorical(self, column: str) -> pd.Categorical:
        values = list(self.tables[column])
        order = sorted(range(len(values)), key=lambda k: values[k])
        rank = np.empty(len(values) + 1, dtype=np.int32)
        rank[np.array(order, dtype=np.int64)] = np.arange(len(values), dtype=np.int32)
        rank[-1] = -1  # code -1, a missing value, stays missing
        codes = rank[np.frombuffer(self.codes[column], dtype=np.int32)]
        return pd.Categorical.from_codes(codes, categories=[values[k] for k in order])


def read_file(path: Path, machine: str, meta: dict[str, dict], into: Columns) -> None:
    """Add one result file's points to `into`; a file that is unreadable, partial or of a
    format asv does not read either is left out, as is a malformed row, each recorded in
    `into.skipped` with the reason."""
    try:
        doc = open_document(path)
    except UnreadableDocument as error:
        into.files += 1
        into.skipped.append((str(path), error.why))
        return
    read_document(doc, machine, meta, into, source=str(path))


def read_document(doc: object, machine: str, meta: dict[str, dict], into: Columns,
                  source: str) -> None:
    """Add the points of one asv result document to `into` (`source` names it in
    `into.skipped`): a file's, or one a worker sent back. Format 1 is migrated in memory
    as asv migrates it (`as_version_2`)."""
    path = source
    into.files += 1
    document, why = as_version_2(doc)
    if document is None:
        into.skipped.append((path, why))
        return
    header: dict[str, Any] = {key: document.get(key) for key in (
        "commit_hash", "env_name", "date", "result_columns", "results")}
    problem = next((k for k, ok in (
        ("commit_hash", isinstance(header["commit_hash"], str) and header["commit_hash"]),
        ("env_name", isinstance(header["env_name"], str)),
        ("date", isinstance(header["date"], int | float)),
        ("result_columns", isinstance(header["result_columns"], list)),
        ("results", isinstance(header["results"], dict)),
    ) if not ok), None)
    if problem:
        into.skipped.append((path, f"missing or malformed {problem!r}"))
        return
    params: dict[str, Any] = document["params"] if isinstance(document.get("params"),
                                                              dict) else {}
    shared = {"machine": machine, "env": header["env_name"], "commit": header["commit_hash"],
              "date": header["date"], "settings": describe_settings(params)}
    for name, row in header["results"].items():
        try:
            constants, points = _points(name, dict(zip(header["result_columns"], row,
                                                       strict=False)), meta.get(name, {}))
        except (TypeError, ValueError, IndexError) as exc:
            into.skipped.append((path, f"benchmark {name}: malformed row ({exc})"))
            continue
        into.add({**shared, **constants}, points)


def as_version_2(doc: object) -> tuple[dict | None, str]:
    """`doc` as an asv results document of format version 2, or None and why not.

    Version 1 goes through asv's own migration (`asv.results.Results.update_to_2`, which
    `asv update` and asv's loader apply), on a copy in memory: the user's file is never
    rewritten, and what asv would read is what is read here. A newer version than asv 0.6
    writes is refused (asv refuses it too), as is a JSON document that is no asv result.
    """
    if not isinstance(doc, dict) or "version" not in doc or "commit_hash" not in doc:
        return None, "not an asv result document (no `version` and `commit_hash`)"
    version = doc["version"]
    if version == ASV_RESULTS_VERSION:
        return doc, ""
    if version != 1:
        return None, (f"asv results format version {version!r}; asv 0.6 and this tool read "
                      f"versions 1 and {ASV_RESULTS_VERSION}")
    from asv.results import Results  # asv's own migration; imported only when needed
    from asv.util import UserError

    results = doc.get("results")
    mine = {**doc, "results": {k: dict(v) if isinstance(v, dict) else v
                               for k, v in results.items()}} if isinstance(results, dict) \
        else doc  # update_to_2 edits the rows it reads: on copies, never the caller's
    try:
        migrated = Results.update_to_2(mine)
    except (UserError, KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        return None, f"asv results format version 1 that asv cannot migrate ({exc})"
    return {**migrated, "version": ASV_RESULTS_VERSION}, ""


def skipped_summary(files: int, skipped: Sequence[tuple[str, str]]) -> str | None:
    """One line for everything left out of `files` result documents: how many files and
    rows, and the first with its reason (None when nothing was). The rest go to `log.info`,
    which the CLI's `--verbose` shows: a store of a thousand unreadable files is one
    warning, not a thousand."""
    if not skipped:
        return None
    rows = sum(why.startswith("benchmark ") for _, why in skipped)
    whole = len({p for p, why in skipped if not why.startswith("benchmark ")})
    parts = ([f"{whole} of {files} result file(s)"] if whole else []) + \
        ([f"{rows} malformed row(s)"] if rows else [])
    path, why = skipped[0]
    return (f"skipped {' and '.join(parts)} (e.g. {path}: {why}); --verbose lists "
            "each")


def log_skipped(*read: Columns) -> None:
    """What the `read` columns left out, together: the one-line summary as a warning, each
    item as info. A reader that fills one `Columns` per file passes them all at once, so
    its skipped files are still one line."""
    skipped = [item for columns in read for item in columns.skipped]
    summary = skipped_summary(sum(columns.files for columns in read), skipped)
    if summary is None:
        return
    log.warning("%s", summary)
    for path, why in skipped:
        log.info("skipped %s: %s", path, why)


def asv_type_of(name: str) -> str:
    """asv's type of a benchmark, from the prefix of its function's name, as asv decides
    it when benchmarks.json says nothing."""
    method = name.rsplit(".", 1)[-1]
    prefix = next((k for k in ASV_TYPES if method.startswith(k)), None)
    return ASV_TYPES[prefix] if prefix else "unknown"


def _points(name: str, cells: dict, meta: dict) -> tuple[dict[str, object], dict[str, list]]:
    """One benchmark row: what its points share, and per point lists, one per combination."""
    params = cells.get("params") or []
    combos = [f"({', '.join(combo)})" if combo else "" for combo in itertools.product(*params)]
    results = cells.get("result")
    if results is None:  # every combination failed, e.g. the build broke
        results = [None] * len(combos)
    if not isinstance(results, list) or len(results) != len(combos):
        raise ValueError(f"{len(results) if isinstance(results, list) else 'no'} results "
                         f"for {len(combos)} parameter combinations")
    asv_type = meta.get("type") or asv_type_of(name)
    asv_type = ASV_TYPES.get(asv_type, asv_type)
    n = len(combos)
    values, status = _values(results)
    samples = _column(cells, "samples", n)
    for i, recorded in enumerate(samples):
        if recorded is None:
            continue
        if not (isinstance(recorded, list) and recorded and all(
                isinstance(x, int | float) and math.isfinite(x) for x in recorded)):
            raise ValueError(f"samples of combination {i} are not a list of finite numbers")
        if status[i] != "ok":
            samples[i] = None
    constants = {"benchmark": name, "type": asv_type, "version": cells.get("version"),
                 "unit": meta.get("unit") or DEFAULT_UNITS.get(asv_type, "unit"),
                 "higher_is_better": meta.get("higher_is_better") is True}
    return constants, {"params": combos, "status": status, "value": values, "samples": samples,
                       **{c: _numbers(_column(cells, f"stats_{c}", n)) for c in STATS}}


def _values(results: list) -> tuple[list[float], list[str]]:
    """A row's results and each one's status: null failed, NaN was skipped, else ok."""
    if None not in results and all(type(v) in (float, int) for v in results) \
            and not any(v != v for v in results):  # the usual row: all measured
        return results, ["ok"] * len(results)
    status = []
    for value in results:
        if value is None:
            status.append("failed")
        elif not isinstance(value, int | float):
            raise ValueError(f"result {value!r} is not a number")
        else:
            status.append("skipped" if math.isnan(value) else "ok")
    return [float(v) if s == "ok" else math.nan for v, s in zip(results, status,
                                                               strict=True)], status


def _numbers(column: list) -> list:
    """A column of statistics as numbers, None where asv wrote none (or something else)."""
    if all(type(x) is float for x in column):
        return column
    return [x if isinstance(x, int | float) else None for x in column]


def _column(cells: dict, key: str, n: int) -> list:
    """A row's cell list over its `n` combinations, None where asv wrote none."""
    column = cells.get(key)
    if not isinstance(column, list):
        return [None] * n
    return column[:n] + [None] * (n - len(column))
