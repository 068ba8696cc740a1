"""Load asv results (format version 2) into one DataFrame, and cut it into detector series.

Reads the raw JSON asv documents in docs/source/dev.rst, not asv's internal classes:
`results/<machine>/<sha[:8]>-<env>.json` rows zip with `result_columns`; a row's lists align
with the cartesian product of its `params`; a `null` result failed, `NaN` was skipped;
`samples` exist only with `--record-samples`. A file that is unreadable, partial or of another
format version is skipped with a warning naming it; one bad file never stops the run.

Direction: lower is better unless the benchmark function carries `higher_is_better = True`
(e.g. `track_throughput.higher_is_better = True`). asv_runner 0.3 copies such user attributes
of a benchmark function into benchmarks.json (`Benchmark._collect_dynamic_attrs`), so the
declaration travels with the results. `series_from_frame(higher_is_better=...)` adds name
patterns for suites that cannot be edited.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from regressions import git
from regressions.detection.detect import Series
from regressions.errors import SpyreRegressError
from regressions.records.asv_documents import ASV_RESULTS_VERSION, has_samples

log = logging.getLogger(__name__)

COLUMNS = ("machine", "env", "benchmark", "params", "commit", "position", "date", "status",
           "value", "samples", "ci_99_a", "ci_99_b", "q_25", "q_75", "unit", "type",
           "version", "higher_is_better")
# asv's benchmark types, by the prefix of the benchmark's name, and what each is read as.
_ASV_TYPES = {"timeraw": "time", "time": "time", "track": "track", "peakmem": "peakmem",
              "mem": "mem"}
_DEFAULT_UNITS = {"time": "seconds"}


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
    no_results = SpyreRegressError(f"no asv results (format version {ASV_RESULTS_VERSION}) under "
                                   f"{root}; run `asv run --record-samples` or fix --results")
    files = [(path, d.name) for d in machines for path in sorted(d.glob("*.json"))
             if path.name != "machine.json"]
    if not files:
        raise no_results
    meta = _benchmarks_meta(root / "benchmarks.json")
    rows = [row for path, name in files for row in _read_file(path, name, meta)]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    if frame.empty:
        raise no_results
    frame["date"] = pd.to_datetime(frame["date"], unit="ms", utc=True)
    if repo is None:
        order = frame.groupby("commit")["date"].min().reset_index().sort_values(["date", "commit"])
        positions = {sha: i for i, sha in enumerate(order["commit"])}
    else:
        positions = {sha: i for i, sha in enumerate(git.first_parent_history(repo))}
        stray = sorted(set(frame["commit"]) - positions.keys())
        if stray:
            log.warning("ignoring results of %d commit(s) not on the first-parent history of "
                        "HEAD in %s: %s", len(stray), repo, ", ".join(s[:8] for s in stray))
            frame = frame[~frame["commit"].isin(stray)]
        if frame.empty:
            raise SpyreRegressError(f"none of the results under {root} are for commits on "
                                    f"the first-parent history of HEAD in {repo}; check --repo")
    frame["position"] = frame["commit"].map(positions).astype(int)
    return frame.sort_values(["machine", "env", "benchmark", "params", "position"],
                             ignore_index=True)


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
    kept = frame[frame["status"] != "skipped"].sort_values("position", kind="stable")
    keys = ["machine", "env", "benchmark", "params", "version"]
    out = []
    for (machine, env, benchmark, params, _), group in kept.groupby(keys, sort=True, dropna=False):
        ok = group[group["status"] == "ok"]
        samples = tuple(
            None if status == "failed" else tuple(s) if isinstance(s, list) else (value,)
            for status, s, value in zip(group["status"], group["samples"], group["value"],
                                        strict=True)
        )
        widths = (pd.to_numeric(ok["ci_99_b"]) - pd.to_numeric(ok["ci_99_a"])).dropna()
        deterministic = None
        if ok["samples"].isna().all() and len(widths):
            deterministic = bool((widths.abs() == 0).all())
        name = f"{benchmark}{params}"
        out.append(Series(
            machine, env, benchmark, params, tuple(group["commit"]), tuple(group["position"]),
            samples, bool(group["higher_is_better"].any()) or any(p.search(name) for p in patterns),
            deterministic, has_samples(group["type"].iloc[0]),
        ))
    return out


def _benchmarks_meta(path: Path) -> dict[str, dict]:
    """Per benchmark: type, unit, higher_is_better from benchmarks.json; {} if unusable."""
    if not path.exists():
        log.warning("no %s: benchmark types come from names, units are unknown", path)
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        log.warning("ignoring %s: not readable JSON (%s)", path, exc)
        return {}
    if not isinstance(doc, dict) or doc.get("version") != ASV_RESULTS_VERSION:
        log.warning("ignoring %s: not an asv benchmarks.json of format version %d", path,
                    ASV_RESULTS_VERSION)
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, dict)}


def _read_file(path: Path, machine: str, meta: dict[str, dict]) -> list[dict]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        log.warning("skipping %s: not readable JSON (%s)", path, exc)
        return []
    return document_points(doc, machine, meta, str(path))


def document_points(doc: object, machine: str, meta: dict[str, dict], source: str
                    ) -> list[dict]:
    """The result points of one asv result document (`source` names it in warnings)."""
    if not isinstance(doc, dict) or doc.get("version") != ASV_RESULTS_VERSION:
        version = doc.get("version") if isinstance(doc, dict) else None
        log.warning("skipping %s: asv results format version %r, expected %d (`asv update` "
                    "migrates older files)", source, version, ASV_RESULTS_VERSION)
        return []
    header = {key: doc.get(key) for key in ("commit_hash", "env_name", "date",
                                            "result_columns", "results")}
    problem = next((k for k, ok in (
        ("commit_hash", isinstance(header["commit_hash"], str) and header["commit_hash"]),
        ("env_name", isinstance(header["env_name"], str)),
        ("date", isinstance(header["date"], int | float)),
        ("result_columns", isinstance(header["result_columns"], list)),
        ("results", isinstance(header["results"], dict)),
    ) if not ok), None)
    if problem:
        log.warning("skipping %s: missing or malformed %r", source, problem)
        return []
    rows = []
    for name, row in header["results"].items():
        try:
            rows += _points(name, dict(zip(header["result_columns"], row, strict=False)),
                            meta.get(name, {}))
        except (TypeError, ValueError, IndexError) as exc:
            log.warning("skipping benchmark %s in %s: malformed row (%s)", name, source, exc)
    for point in rows:
        point.update(machine=machine, env=header["env_name"], commit=header["commit_hash"],
                     date=header["date"])
    return rows


def asv_type_of(name: str) -> str:
    """asv's type of a benchmark, from the prefix of its function's name, as asv decides
    it when benchmarks.json says nothing."""
    method = name.rsplit(".", 1)[-1]
    prefix = next((k for k in _ASV_TYPES if method.startswith(k)), None)
    return _ASV_TYPES[prefix] if prefix else "unknown"


def _points(name: str, cells: dict, meta: dict) -> list[dict]:
    """The result points of one benchmark row, one per parameter combination."""
    params = cells.get("params") or []
    combos = list(itertools.product(*params))
    results = cells.get("result")
    if results is None:  # every combination failed, e.g. the build broke
        results = [None] * len(combos)
    if not isinstance(results, list) or len(results) != len(combos):
        raise ValueError(f"{len(results) if isinstance(results, list) else 'no'} results "
                         f"for {len(combos)} parameter combinations")
    asv_type = meta.get("type") or asv_type_of(name)
    asv_type = _ASV_TYPES.get(asv_type, asv_type)
    unit = meta.get("unit") or _DEFAULT_UNITS.get(asv_type, "unit")
    points = []
    for i, (combo, value) in enumerate(zip(combos, results, strict=True)):
        samples = _cell(cells, "samples", i)
        if value is None:
            status = "failed"
        elif not isinstance(value, int | float):
            raise ValueError(f"result {value!r} is not a number")
        else:
            status = "skipped" if math.isnan(value) else "ok"
        if samples is not None and not (isinstance(samples, list) and samples
                                        and all(isinstance(x, int | float) and math.isfinite(x)
                                                for x in samples)):
            raise ValueError(f"samples of combination {i} are not a list of finite numbers")
        points.append({
            "benchmark": name, "params": f"({', '.join(combo)})" if combo else "",
            "status": status, "value": float(value) if status == "ok" else math.nan,
            "samples": samples if status == "ok" else None,
            **{column: _cell(cells, f"stats_{column}", i)
               for column in ("ci_99_a", "ci_99_b", "q_25", "q_75")},
            "unit": unit, "type": asv_type, "version": cells.get("version"),
            "higher_is_better": meta.get("higher_is_better") is True,
        })
    return points


def _cell(cells: dict, key: str, i: int):
    column = cells.get(key)
    return column[i] if isinstance(column, list) and i < len(column) else None


def samples_at(results_dir: Path | str, machine: str, commit: str
               ) -> dict[tuple[str, str], tuple[float, ...] | None]:
    """What the results hold for one commit: (benchmark, params) -> its samples (or its one
    value when asv kept no samples), None where the benchmark failed; skipped points left out.
    The nightly reads it before and after `asv run --append-samples` to learn what a
    re-measurement added."""
    root = Path(results_dir)
    meta = _benchmarks_meta(root / "benchmarks.json") if (root / "benchmarks.json").exists() \
        else {}
    found: dict[tuple[str, str], tuple[float, ...] | None] = {}
    for path in sorted((root / machine).glob(f"{commit[:8]}-*.json")):
        found.update(point_samples(p for p in _read_file(path, machine, meta)
                                   if p["commit"] == commit))
    return found


def point_samples(points) -> dict[tuple[str, str], tuple[float, ...] | None]:
    """(benchmark, params) -> samples (or the one value), None where it failed, of result
    points; skipped ones left out."""
    return {(p["benchmark"], p["params"]): None if p["status"] == "failed"
            else tuple(p["samples"]) if p["samples"] else (p["value"],)
            for p in points if p["status"] != "skipped"}
