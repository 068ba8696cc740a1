"""A table of results (CSV or Parquet) read into the table asv's results are read into.

Performance history often lives outside asv: a CI job writes one row per benchmark and run
into a database (torch-spyre's nightly and weekly runs go to ClickHouse as wide rows: one
row per operation and shape, a column per figure, `created_at` and no commit), and an export
of it is a CSV or Parquet file. `load_table` reads such a file into the same columns
`results.load_results` builds from an asv store (`result_columns.COLUMNS`, plus `kind`), so
`results.series_from_frame` and everything after it (detection, alerts, environment alerts,
their JSON) cannot tell the two apart. pandas reads both formats (pyarrow for Parquet).

Two layouts. *Long* rows hold one value each, in columns of these names (no mapping
needed): `benchmark`, `value` and at least one of `commit`, `order`, `date`; optionally
`params`, `machine`, `env`, `machine.<name>` (a machine parameter, e.g. `machine.cpu`),
`kind` (what the value is: a metric kind of `regressions.metrics`, or `clock`, `count`),
`unit`, `higher_is_better`, `samples` (a JSON list of numbers), `status` (`ok`, `failed`,
`skipped`) and `version` (the benchmark's version: a new one starts a new series). *Wide*
rows hold several values, one column each, and a mapping file (`read_mapping`, JSON, with a
`version`) names which column is what; docs/detection.md has the one for torch-spyre's rows.

History: the first-parent chain of `--repo` when rows name commits and it is given, else
`order`, else the earliest `date` of each commit; a table without a commit column has one
point per date (or order), named by it. Any row that cannot be read (a missing column, a
value that is not a number, a date that is not one, two rows for one point) stops the
reading with one line naming the row or the column: a table is the user's own export, and
a row left out would be a result silently lost.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from regressions import metrics
from regressions.detection.environment import describe_settings, parse_settings
from regressions.errors import SpyreRegressError
from regressions.records import files
from regressions.records.result_columns import CODED, COLUMNS, asv_type_of
from regressions.records.results import in_history_order

MAPPING_VERSION = 1
FORMATS = {".csv": "CSV", ".parquet": "Parquet", ".pq": "Parquet"}
MACHINE = "table"  # the machine of rows that name none
MACHINE_PARAMETER = "machine."  # prefix of a long table's machine parameter columns
# What a value is, beyond the metric kinds: a clock's reading is a time; a count does not
# move with the machine (`metrics` "count").
KIND_ALIASES = {"clock": "time"}
STATUSES = ("ok", "failed", "skipped")  # asv's: a failure is a symptom, a skip is no point
TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no", "")


@dataclass(frozen=True)
class ValueColumn:
    """One column of a wide row: the value it holds and how to judge it."""

    column: str
    kind: str | None = None
    unit: str = ""
    higher_is_better: bool = False


@dataclass(frozen=True, kw_only=True)
class Mapping:
    """Which columns of a table are what. `benchmark` columns are joined by "."; `params`
    from one column is taken as written (asv's printed form), from several it is
    "(name=value, ...)" of those that hold a value. A long table names its `value` column;
    a wide one lists `values`, and each of its rows becomes one point per listed column that
    holds a value, the benchmark named `<benchmark>.<column>`."""

    benchmark: tuple[str, ...] = ("benchmark",)
    params: tuple[str, ...] = ()
    machine: str | None = None
    machine_params: tuple[str, ...] = ()
    env: str | None = None
    commit: str | None = None
    order: str | None = None
    date: str | None = None
    value: str | None = "value"
    values: tuple[ValueColumn, ...] = ()
    kind: str | None = None
    unit: str | None = None
    higher_is_better: str | None = None
    samples: str | None = None
    status: str | None = None
    benchmark_version: str | None = None  # the column of asv's benchmark version

    def columns(self) -> list[str]:
        """Every column the mapping reads."""
        single = [getattr(self, f.name) for f in fields(self)
                  if isinstance(getattr(self, f.name), str)]
        return [*self.benchmark, *self.params, *self.machine_params, *single,
                *(v.column for v in self.values)]


def long_mapping(columns: list[str]) -> Mapping:
    """The mapping of a long table from its header: each known name that is present."""
    present = set(columns)

    def column(name: str) -> str | None:
        return name if name in present else None

    return Mapping(params=("params",) if "params" in present else (),
                   machine_params=tuple(c for c in columns if c.startswith(MACHINE_PARAMETER)),
                   machine=column("machine"), env=column("env"), commit=column("commit"),
                   order=column("order"), date=column("date"), kind=column("kind"),
                   unit=column("unit"), higher_is_better=column("higher_is_better"),
                   samples=column("samples"), status=column("status"),
                   benchmark_version=column("version"))


def read_mapping(path: Path) -> Mapping:
    """A mapping file: JSON with `version` 1 and the `Mapping` fields (lists for
    `benchmark`, `params`, `machine_params`; `values` an object of column -> {kind, unit,
    higher_is_better}).

    Raises:
        SpyreRegressError: unreadable, another version, an unknown field or a bad value.
    """
    fix = "pass a column mapping as docs/detection.md describes"
    document = files.read_json(path, "column mapping", fix)
    if not isinstance(document, dict) or document.get("version") != MAPPING_VERSION:
        raise SpyreRegressError(f"column mapping {path} has no \"version\": "
                                f"{MAPPING_VERSION}; {fix}")
    known = {f.name for f in fields(Mapping)}
    unknown = sorted(set(document) - known - {"version"})
    if unknown:
        raise SpyreRegressError(f"column mapping {path}: unknown field {unknown[0]!r}; known: "
                                f"{', '.join(sorted(known))}")
    try:
        return _mapping(document)
    except (TypeError, ValueError, AttributeError) as error:
        raise SpyreRegressError(f"column mapping {path}: {error}; {fix}") from None


def _mapping(document: dict[str, Any]) -> Mapping:
    values = tuple(ValueColumn(column, _kind(spec.get("kind")), str(spec.get("unit", "")),
                               bool(spec.get("higher_is_better", False)))
                   for column, spec in (document.get("values") or {}).items())
    lists: dict[str, Any] = {name: tuple(_text_list(document, name)) for name in (
        "benchmark", "params", "machine_params") if name in document}
    single: dict[str, Any] = {f.name: document[f.name] for f in fields(Mapping)
                              if f.name in document and f.name not in lists
                              and f.name != "values"}
    for name, column in single.items():
        if column is not None and not isinstance(column, str):
            raise ValueError(f"{name!r} must name one column")
    if values and "value" not in single:
        single["value"] = None
    if not values and not single.get("value", "value"):
        raise ValueError("no \"value\" column and no \"values\"")
    return Mapping(**lists, **single, values=values)


def _text_list(document: dict[str, Any], name: str) -> list[str]:
    items = document[name]
    items = [items] if isinstance(items, str) else items
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ValueError(f"{name!r} must be a column or a list of columns")
    return items


def _kind(text: object) -> str | None:
    """The metric kind a table's kind names (None: judged by the benchmark's name)."""
    if text is None or text == "":
        return None
    kind = KIND_ALIASES.get(str(text), str(text))
    if kind not in metrics.KINDS or kind == metrics.FAILURE:
        known = sorted({*KIND_ALIASES, *metrics.KINDS} - {metrics.FAILURE})
        raise ValueError(f"kind {text!r} is none of {', '.join(known)}")
    return kind


def load_table(path: Path, *, mapping: Mapping | None = None, repo: Path | None = None
               ) -> pd.DataFrame:
    """Every point of the table at `path`, one row each, as `results.load_results` returns
    an asv store's (the columns `result_columns.COLUMNS` and `kind`), in history order.

    Raises:
        SpyreRegressError: the file cannot be read, is empty, lacks a column the mapping
            names, or a row holds what cannot be read (one line naming the row or column).
    """
    raw = _read(Path(path))
    mapping = mapping or long_mapping(list(raw.columns))
    missing = [c for c in mapping.columns() if c not in raw.columns]
    if missing or not (mapping.commit or mapping.order or mapping.date):
        need = missing[0] if missing else "commit, order or date"
        raise SpyreRegressError(f"{path}: no column {need!r} (columns: "
                                f"{', '.join(map(str, raw.columns))}); "
                                "name it in the table or in --mapping")
    points = _long(raw, mapping)
    frame = _Reader(points, mapping, FORMATS[Path(path).suffix.lower()] == "CSV").frame()
    return in_history_order(frame, repo if mapping.commit else None, f"the rows of {path}",
                            key="order" if mapping.order else "date").drop(columns="order")


def _read(path: Path) -> pd.DataFrame:
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise SpyreRegressError(f"{path}: not a table this tool reads (by its name: .csv, "
                                ".parquet); pass a CSV or Parquet file")
    if not path.is_file():
        raise SpyreRegressError(f"table {path} does not exist or is not a file; pass the "
                                "CSV or Parquet file of results")
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False) if kind == "CSV" \
            else pd.read_parquet(path)
    except pd.errors.EmptyDataError:
        raw = pd.DataFrame()
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as error:
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
        raise SpyreRegressError(f"{path}: not readable as {kind} ({detail}); pass a "
                                f"{kind} file of results") from None
    if raw.empty:
        raise SpyreRegressError(f"{path}: the table holds no rows; pass a table of results")
    raw.columns = [str(c) for c in raw.columns]
    return raw


def _long(raw: pd.DataFrame, mapping: Mapping) -> pd.DataFrame:
    """One row per point, `row` the 1-based row of the file it came from, `value_kind`,
    `value_unit`, `value_better` per point of a wide table."""
    raw = raw.assign(row=np.arange(1, len(raw) + 1))
    if not mapping.values:
        return raw.rename(columns={mapping.value: "_value"}) if mapping.value else raw
    parts = []
    for spec in mapping.values:
        cells = raw[spec.column]
        held = cells.notna() & (cells.astype(str).str.strip() != "")
        part = raw[held].assign(_value=cells[held], _suffix=spec.column, _kind=spec.kind,
                                _unit=spec.unit, _better=spec.higher_is_better)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


@dataclass
class _Reader:
    """The points of a table turned into the result table's columns, checked row by row."""

    points: pd.DataFrame
    mapping: Mapping
    csv: bool
    out: dict[str, Any] = field(default_factory=dict)

    def where(self, i: int) -> str:
        row = int(self.points["row"].iloc[i])
        return f"row {row}" + (f" (line {row + 1})" if self.csv else "")

    def text(self, column: str | None, default: str = "") -> list[str]:
        if column is None:
            return [default] * len(self.points)
        return ["" if _missing(v) else _plain(v) for v in self.points[column].tolist()]

    def frame(self) -> pd.DataFrame:
        m, n = self.mapping, len(self.points)
        self.out["benchmark"] = self._benchmarks()
        self.out["params"] = self._params()
        self.out["machine"] = self.text(m.machine, MACHINE)
        self.out["env"] = self.text(m.env)
        self.out["version"] = self.text(m.benchmark_version)
        self.out["settings"] = self._settings()
        self.out["status"] = self._statuses()
        self.out["value"] = self._values()
        self.out["samples"] = self._samples()
        self.out["date"] = self._dates()
        self.out["order"] = self._orders()
        self.out["commit"] = self._commits()
        self._kinds()
        self._check_unique()
        nan = np.full(n, math.nan)
        self.out.update(ci_99_a=nan, ci_99_b=nan, q_25=nan, q_75=nan,
                        position=np.zeros(n, dtype=np.int64))
        frame = pd.DataFrame({c: self.out[c] for c in (*COLUMNS, "kind", "order")})
        for column in (*CODED, "kind"):
            frame[column] = pd.Categorical(frame[column])
        return frame

    def _benchmarks(self) -> list[str]:
        parts = [self.text(c) for c in self.mapping.benchmark]
        names = [".".join(p for p in row if p) for row in zip(*parts, strict=True)]
        if "_suffix" in self.points:
            names = [f"{b}.{s}" if b else s for b, s in
                     zip(names, self.points["_suffix"].tolist(), strict=True)]
        for i, name in enumerate(names):
            if not name:
                raise SpyreRegressError(f"{self.where(i)}: no benchmark name (column "
                                        f"{', '.join(self.mapping.benchmark)}); fill it in")
        return names

    def _params(self) -> list[str]:
        columns = self.mapping.params
        if len(columns) == 1:
            return self.text(columns[0])
        cells = [self.text(c) for c in columns]
        return ["(" + ", ".join(f"{c}={v!r}" for c, v in zip(columns, row, strict=True) if v)
                + ")" if any(row) else "" for row in zip(*cells, strict=True)] \
            if columns else [""] * len(self.points)

    def _settings(self) -> list[str]:
        columns = self.mapping.machine_params
        cells = [self.text(c) for c in columns]
        names = [c.removeprefix(MACHINE_PARAMETER) for c in columns]
        return [describe_settings(dict(zip(names, row, strict=True))) if columns else ""
                for row in zip(*cells, strict=True)] if columns else [""] * len(self.points)

    def _statuses(self) -> list[str]:
        statuses = [s.lower() or "ok" for s in self.text(self.mapping.status, "ok")]
        for i, status in enumerate(statuses):
            if status not in STATUSES:
                raise SpyreRegressError(f"{self.where(i)}: status {status!r} is none of "
                                        f"{', '.join(STATUSES)}; fix column "
                                        f"{self.mapping.status!r}")
        return statuses

    def _values(self) -> np.ndarray:
        column = "_value" if "_value" in self.points else None
        cells = self.points[column].tolist() if column else [math.nan] * len(self.points)
        out = np.full(len(cells), math.nan)
        name = self.mapping.value or "values"
        for i, (cell, status) in enumerate(zip(cells, self.out["status"], strict=True)):
            number = _number(cell)
            if status == "ok" and (number is None or not math.isfinite(number)):
                raise SpyreRegressError(f"{self.where(i)}: value {_plain(cell)!r} in column "
                                        f"{self._value_column(i, name)!r} is not a number; "
                                        "fix it, or mark the row's status failed")
            out[i] = math.nan if status != "ok" or number is None else number
        return out

    def _value_column(self, i: int, name: str) -> str:
        return str(self.points["_suffix"].iloc[i]) if "_suffix" in self.points else name

    def _samples(self) -> np.ndarray:
        out = np.full(len(self.points), None, dtype=object)
        if self.mapping.samples is None:
            return out
        for i, cell in enumerate(self.points[self.mapping.samples].tolist()):
            if _missing(cell) or self.out["status"][i] != "ok":
                continue
            try:
                values = json.loads(cell) if isinstance(cell, str) else list(cell)
                floats = [float(v) for v in values]
            except (TypeError, ValueError):
                floats = []
            if not floats or not all(map(math.isfinite, floats)):
                raise SpyreRegressError(f"{self.where(i)}: samples {_plain(cell)[:60]!r} are "
                                        "not a list of numbers; write them as a JSON list, "
                                        "e.g. [0.51, 0.52]")
            out[i] = floats
        return out

    def _dates(self) -> pd.Series:
        column = self.mapping.date
        if column is None:
            return pd.Series(pd.NaT, index=range(len(self.points)), dtype="datetime64[ns, UTC]")
        cells = self.points[column]
        if pd.api.types.is_numeric_dtype(cells.dtype):  # seconds or ms? not guessed
            parsed = pd.Series(pd.NaT, index=cells.index, dtype="datetime64[ns, UTC]")
        elif pd.api.types.is_datetime64_any_dtype(cells.dtype):
            parsed = pd.to_datetime(cells, utc=True)
        else:
            parsed = pd.to_datetime(cells.astype(str), utc=True, errors="coerce",
                                    format="ISO8601")
        bad = np.flatnonzero(parsed.isna().to_numpy())
        if bad.size:
            raise SpyreRegressError(f"{self.where(int(bad[0]))}: date "
                                    f"{_plain(cells.iloc[int(bad[0])])!r} in column "
                                    f"{column!r} is not a date; write ISO 8601, e.g. "
                                    "2026-04-25T14:20:45Z")
        return parsed.reset_index(drop=True)

    def _orders(self) -> np.ndarray:
        column = self.mapping.order
        if column is None:
            return np.zeros(len(self.points))
        numbers = [_number(v) for v in self.points[column].tolist()]
        for i, number in enumerate(numbers):
            if number is None or not math.isfinite(number):
                raise SpyreRegressError(f"{self.where(i)}: order "
                                        f"{_plain(self.points[column].iloc[i])!r} in column "
                                        f"{column!r} is not a number; fix it")
        return np.array(numbers, dtype=float)

    def _commits(self) -> list[str]:
        if self.mapping.commit is not None:
            commits = self.text(self.mapping.commit)
            for i, commit in enumerate(commits):
                if not commit:
                    raise SpyreRegressError(f"{self.where(i)}: no commit in column "
                                            f"{self.mapping.commit!r}; fill it in")
            return commits
        if self.mapping.date is not None:  # a point per date, named by it
            return [_date_name(d) for d in self.out["date"]]
        return [f"{o:g}" for o in self.out["order"]]

    def _kinds(self) -> None:
        """`kind`, `unit`, `higher_is_better` and asv's `type` (by the name) per point."""
        m = self.mapping
        if "_kind" in self.points:
            kinds = [None if _missing(k) else str(k) for k in self.points["_kind"].tolist()]
            units = self.points["_unit"].astype(str).tolist()
            better = [bool(b) for b in self.points["_better"].tolist()]
        else:
            kinds, units = [], self.text(m.unit)
            for i, text in enumerate(self.text(m.kind)):
                try:
                    kinds.append(_kind(text))
                except ValueError as error:
                    raise SpyreRegressError(f"{self.where(i)}: {error}; fix column "
                                            f"{m.kind!r}") from None
            better = [self._flag(i, t) for i, t in enumerate(self.text(m.higher_is_better))]
        self.out.update(kind=kinds, unit=units, higher_is_better=np.array(better, dtype=bool),
                        type=[asv_type_of(b) for b in self.out["benchmark"]])

    def _flag(self, i: int, text: str) -> bool:
        if text.lower() in TRUE + FALSE:
            return text.lower() in TRUE
        raise SpyreRegressError(f"{self.where(i)}: higher_is_better {text!r} is not true or "
                                "false; fix it")

    def _check_unique(self) -> None:
        """One row per point: two rows for one (machine, env, benchmark, params, version,
        commit) would be one result twice, or two results of which one is lost."""
        keys = pd.DataFrame({c: self.out[c] for c in (
            "machine", "env", "benchmark", "params", "version", "commit")})
        twice = np.flatnonzero(keys.duplicated().to_numpy())
        if twice.size:
            i = int(twice[0])
            first = int(np.flatnonzero((keys == keys.iloc[i]).all(axis=1).to_numpy())[0])
            name = f"{self.out['benchmark'][i]}{self.out['params'][i]}"
            raise SpyreRegressError(f"{self.where(i)}: duplicate key: {self.where(first)} "
                                    f"already gives {name} at {self.out['commit'][i]} on "
                                    f"{self.out['machine'][i]}; keep one row per point")


def long_table(frame: pd.DataFrame, *, lists: bool = False) -> pd.DataFrame:
    """A table of points as `load_table` and `results.load_results` return them, in the long
    layout `load_table` reads back without a mapping: machine parameters as `machine.<name>`
    columns, dates in ISO 8601, samples as JSON lists (as lists with `lists`, for Parquet),
    `status` failed or skipped where a store has no value."""
    settings = [parse_settings(text) if isinstance(text, str) else {}
                for text in frame["settings"].tolist()]
    names = sorted({name for found in settings for name in found})
    samples = [None if s is None else (list(s) if lists else json.dumps(list(s)))
               for s in frame["samples"].tolist()]

    def text(column: str) -> list[str]:
        return ["" if _missing(v) else str(v) for v in frame[column].astype(object).tolist()]

    return pd.DataFrame({
        **{c: text(c) for c in ("machine", "env", "benchmark", "params", "version", "commit")},
        "date": frame["date"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "status": text("status"), "value": frame["value"], "unit": text("unit"),
        "higher_is_better": frame["higher_is_better"].astype(bool), "samples": samples,
        **{f"{MACHINE_PARAMETER}{name}": [found.get(name, "") for found in settings]
           for name in names}})


def _date_name(date: pd.Timestamp) -> str:
    """A point named by its date, in UTC: 2026-04-25T14:20:45Z (with the fraction of a
    second where there is one)."""
    text = date.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = date.strftime("%f").rstrip("0")
    return f"{text}.{fraction}Z" if fraction else f"{text}Z"


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or \
        value is pd.NaT or (isinstance(value, str) and not value.strip())


def _plain(value: object) -> str:
    """A cell as text: whole numbers without a decimal point (a Parquet column of ints with
    a gap reads as floats)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | np.number):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None
