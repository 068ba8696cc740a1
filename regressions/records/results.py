"""Load asv results (format version 2) into one DataFrame, and cut it into detector series.

Reads the raw JSON asv documents in docs/source/dev.rst, not asv's internal classes
(`result_columns`: the files read into columns): `results/<machine>/<sha[:8]>-<env>.json`
rows zip with `result_columns`; a row's lists align with the cartesian product of its
`params`; a `null` result failed, `NaN` was skipped; `samples` exist only with
`--record-samples`. Format version 1 (asv before 0.5) is migrated in memory as asv does
(`result_columns.as_version_2`). A file that is unreadable, partial or of a format asv does
not read is skipped; one bad file never stops the run, and all that were skipped are one
warning line (count and an example; each at log level INFO).

Direction: lower is better unless the benchmark function carries `higher_is_better = True`
(e.g. `track_throughput.higher_is_better = True`). asv_runner 0.3 copies such user attributes
of a benchmark function into benchmarks.json (`Benchmark._collect_dynamic_attrs`), so the
declaration travels with the results. `series_from_frame(higher_is_better=...)` adds name
patterns for suites that cannot be edited.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from regressions import git
from regressions.detection.detect import Series
from regressions.errors import SpyreRegressError
from regressions.records.asv_documents import (
    ASV_RESULTS_VERSION,
    UnreadableDocument,
    has_samples,
    open_document,
)
from regressions.records.result_columns import (
    COLUMNS,
    Columns,
    asv_type_of,
    log_skipped,
    read_file,
)

__all__ = ["COLUMNS", "asv_type_of", "benchmarks_meta", "in_history_order", "load_results",
           "series_from_frame"]
log = logging.getLogger(__name__)


def load_results(
    results_dir: Path | str, *, repo: Path | str | None = None, machine: str | None = None
) -> pd.DataFrame:
    """Every result point under `results_dir`, one row per (machine, env, benchmark, params,
    commit), with `position` = the commit's place in history.

    History is the first-parent chain of HEAD in `repo` when given (results of commits off
    that chain are dropped with a warning), else the commit dates stored in the results.

    Raises:
        SpyreRegressError: no such directory, no such machine, or no loadable results.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise SpyreRegressError(f"results directory {root} does not exist; pass asv's "
                                "results_dir (`results_dir` in asv.conf.json, e.g. .asv/results)")
    if (root / "machine.json").is_file():
        raise SpyreRegressError(f"{root} is one machine's folder of asv results; pass the "
                                f"results directory above it ({root.parent}), with "
                                f"--machine {root.name} to keep to this machine")
    machines = sorted(d for d in root.iterdir() if d.is_dir())
    if machine is not None:
        found = [d.name for d in machines]
        machines = [d for d in machines if d.name == machine]
        if not machines:
            raise SpyreRegressError(f"no results for machine {machine!r} under {root}; "
                                    f"machines found: {', '.join(found) or 'none'}")
    no_results = SpyreRegressError(f"no asv results under {root} (none readable); run `asv run "
                                   "--record-samples` or fix --results")
    files = [(path, d.name) for d in machines for path in sorted(d.glob("*.json"))
             if path.name != "machine.json"]
    if not files:
        raise no_results
    meta = benchmarks_meta(root / "benchmarks.json")
    columns = Columns()
    for path, name in files:
        read_file(path, name, meta, columns)
    log_skipped(columns)
    frame = columns.frame()
    del columns
    if frame.empty:
        raise no_results
    frame["date"] = pd.to_datetime(frame["date"], unit="ms", utc=True)
    return in_history_order(frame, repo, f"the results under {root}")


def in_history_order(frame: pd.DataFrame, repo: Path | str | None, source: str, *,
                     key: str = "date") -> pd.DataFrame:
    """The table sorted by series and history, with `position` each commit's place: the
    first-parent chain of HEAD in `repo` when given (rows of commits off it dropped with a
    warning), else the smallest `key` (a date, or a table's order) each commit has (then the
    commit, for ties). `source` names the table in the error when no commit is on the
    chain.

    Raises:
        SpyreRegressError: none of the table's commits are on the first-parent history.
    """
    if repo is None:
        order = frame.groupby("commit", observed=True)[key].min().reset_index() \
            .sort_values([key, "commit"])
        positions = {sha: i for i, sha in enumerate(order["commit"])}
    else:
        positions = {sha: i for i, sha in enumerate(git.first_parent_history(repo))}
        stray = sorted(set(frame["commit"]) - positions.keys())
        if stray:
            log.warning("ignoring results of %d commit(s) not on the first-parent history of "
                        "HEAD in %s: %s", len(stray), repo, ", ".join(s[:8] for s in stray))
            frame = frame[~frame["commit"].isin(stray)].reset_index(drop=True)
            frame["commit"] = frame["commit"].cat.remove_unused_categories()
        if frame.empty:
            raise SpyreRegressError(f"none of {source} are for commits on the first-parent "
                                    f"history of HEAD in {repo}; check --repo")
    commits = frame["commit"].cat
    place = np.array([positions[c] for c in commits.categories], dtype=np.int64)
    frame["position"] = place[commits.codes.to_numpy()]
    return frame.iloc[_order(frame, ["machine", "env", "benchmark", "params", "position"])
                      ].reset_index(drop=True)


def _order(frame: pd.DataFrame, keys: Sequence[str], rows: np.ndarray | None = None
           ) -> np.ndarray:
    """The `rows` (default all) sorted by `keys`, the first the most significant, through
    integer codes (sorting a million rows by their strings is what took the time)."""
    codes = [_codes(frame[k]) for k in keys]
    if rows is not None:
        codes = [c[rows] for c in codes]
    order = np.lexsort(codes[::-1])
    return order if rows is None else rows[order]


def _codes(column: pd.Series) -> np.ndarray:
    """Integer codes that sort as the column's values do."""
    if isinstance(column.dtype, pd.CategoricalDtype) and \
            column.cat.categories.is_monotonic_increasing:
        return column.cat.codes.to_numpy()
    return pd.factorize(column, sort=True, use_na_sentinel=False)[0]


def series_from_frame(frame: pd.DataFrame, *, higher_is_better: Sequence[str] = ()) -> list[Series]:
    """One `Series` per (machine, env, benchmark, params, benchmark version).

    A benchmark whose version changed (asv hashes its source) starts a new series: results
    before and after measure different code. Skipped points are dropped, failed ones kept
    as None. Without samples, asv's 99% CI of each value decides whether the series is
    deterministic (all CIs of zero width) or noisy.

    Args:
        higher_is_better: regexes (re.search on "benchmark(params)") of higher-is-better
            series, besides those whose benchmark declares it.
    """
    patterns = [re.compile(p) for p in higher_is_better]
    keys = ["machine", "env", "benchmark", "params", "version", "position"]
    rows = _order(frame, keys, np.flatnonzero((frame["status"] != "skipped").to_numpy()))
    codes = np.stack([_codes(frame[k])[rows] for k in keys[:-1]])
    bounds = np.flatnonzero(np.any(np.diff(codes, axis=1) != 0, axis=0)) + 1
    points = _Points(frame, rows)
    out = []
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(rows)], strict=True):
        if lo == hi:
            continue
        machine, env, benchmark, params, asv_type = points.first(lo)
        name = f"{benchmark}{params}"
        out.append(Series(
            machine=machine, env=env, benchmark=benchmark, params=params,
            commits=points.commits(lo, hi), positions=points.positions(lo, hi),
            samples=points.samples(lo, hi), higher_is_better=points.higher_is_better(lo, hi) or any(
                p.search(name) for p in patterns), deterministic=points.deterministic(lo, hi),
            keeps_samples=has_samples(asv_type), settings=points.settings(lo, hi),
            kind=points.kind(lo)))
    return out


class _Points:
    """The table's rows in series order, handed out one series at a time: a store of a
    million points never holds a second copy of itself as Python objects."""

    def __init__(self, frame: pd.DataFrame, rows: np.ndarray) -> None:
        self.rows = rows
        self.strings = {c: (list(frame[c].cat.categories), frame[c].cat.codes.to_numpy()[rows])
                        for c in ("machine", "env", "benchmark", "params", "type", "commit",
                                  "settings", "kind") if c in frame
                        and isinstance(frame[c].dtype, pd.CategoricalDtype)}
        self.frame = frame
        position = frame["position"].to_numpy()[rows]
        self.position = position
        self.numbers = list(range(int(position.max()) + 1)) if position.size else []
        status = frame["status"].to_numpy()[rows]
        self.ok, self.failed = status == "ok", status == "failed"
        del status
        self.value = frame["value"].to_numpy()[rows]
        self.recorded = frame["samples"].to_numpy()[rows] if frame["samples"].notna().any() \
            else None  # a store without samples: one value per point
        self.better = frame["higher_is_better"].to_numpy()[rows]
        self.widths = (frame["ci_99_b"] - frame["ci_99_a"]).abs().to_numpy()[rows]

    def _strings(self, column: str, lo: int, hi: int) -> list:
        if column not in self.strings:  # a table built by hand, without categories
            return self.frame[column].to_numpy()[self.rows[lo:hi]].tolist()
        categories, codes = self.strings[column]
        return [categories[k] if k >= 0 else "" for k in codes[lo:hi].tolist()]

    def first(self, lo: int) -> tuple:
        return tuple(self._strings(c, lo, lo + 1)[0]
                     for c in ("machine", "env", "benchmark", "params", "type"))

    def kind(self, lo: int) -> str | None:
        """The metric kind the source declared for the series (a table's), else None."""
        if "kind" not in self.frame:
            return None
        return self._strings("kind", lo, lo + 1)[0] or None

    def commits(self, lo: int, hi: int) -> tuple[str, ...]:
        return tuple(self._strings("commit", lo, hi))

    def positions(self, lo: int, hi: int) -> tuple[int, ...]:
        return tuple(self.numbers[k] for k in self.position[lo:hi].tolist())  # shared ints

    def settings(self, lo: int, hi: int) -> tuple[str, ...]:
        """The recorded machine parameters per point; () when they never change (nothing
        for detection to compare)."""
        if "settings" in self.strings:
            codes = self.strings["settings"][1][lo:hi]
            if codes.size and (codes == codes[0]).all():
                return ()
        return tuple(x if isinstance(x, str) else "" for x in self._strings("settings", lo, hi))

    def samples(self, lo: int, hi: int) -> tuple[tuple[float, ...] | None, ...]:
        """Per point its samples, or its one value when asv kept none; None where it
        failed."""
        recorded = self.recorded[lo:hi].tolist() if self.recorded is not None \
            else [None] * (hi - lo)
        return tuple(None if failed else tuple(samples) if samples is not None else (value,)
                     for failed, samples, value in zip(self.failed[lo:hi].tolist(), recorded,
                                                       self.value[lo:hi].tolist(), strict=True))

    def higher_is_better(self, lo: int, hi: int) -> bool:
        return bool(self.better[lo:hi].any())

    def deterministic(self, lo: int, hi: int) -> bool | None:
        """Without samples, asv's 99% CIs decide: all of zero width is deterministic; None
        when the series has samples or no CI."""
        ok = self.ok[lo:hi]
        if self.recorded is not None and any(
                r is not None for r in self.recorded[lo:hi][ok].tolist()):
            return None
        widths = self.widths[lo:hi][ok]
        known = widths[~np.isnan(widths)]
        return bool((known == 0).all()) if known.size else None


def benchmarks_meta(path: Path) -> dict[str, dict]:
    """Per benchmark: type, unit, higher_is_better from benchmarks.json; {} if unusable."""
    if not path.exists():
        log.warning("no %s: benchmark types come from names, units are unknown", path)
        return {}
    try:
        doc = open_document(path)
    except UnreadableDocument as error:
        log.warning("ignoring %s", error)
        return {}
    if doc.get("version") != ASV_RESULTS_VERSION:
        log.warning("ignoring %s: not an asv benchmarks.json of format version %d", path,
                    ASV_RESULTS_VERSION)
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, dict)}
