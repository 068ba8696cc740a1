"""An asv results directory, read and written through one object: the results store.

asv keeps its results as documents (docs/source/dev.rst, "Benchmark suite layout and file
formats"): `benchmarks.json` (the suite's benchmarks), one folder per machine with its
`machine.json`, and one document per commit and environment, `<sha[:8]>-<env>.json`. The
serial nightly, the distributed one, re-measurement's prices, the shards' durations and the
investigation's targets all read them here: the series detection judges (`results`), the
commits and benchmarks a store holds, what a commit measured, what a benchmark took. A
document is parsed in one place (`documents`, `rows`); a file that does not parse is left
out, as asv leaves it, and `load_results` says why when it reads the series.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from regressions.detection.detect import Series
from regressions.detection.remeasure import Costs
from regressions.errors import SpyreRegressError
from regressions.records import asv_documents, results
from regressions.records.result_columns import (
    Columns,
    log_skipped,
    read_document,
    read_file,
)

Samples = dict[tuple[str, str], tuple[float, ...] | None]  # (benchmark, params) -> samples


@dataclass(frozen=True)
class ResultsStore:
    """The results directory `root` (asv's `results_dir`), of one `machine` or of every
    one; `repo` orders commits by its first-parent history (else by the results' dates)."""

    root: Path
    machine: str | None = None
    repo: Path | None = None

    # -- what detection reads -------------------------------------------------------------
    def frame(self) -> pd.DataFrame:
        """Every result point, one row each (`results.load_results`).

        Raises:
            SpyreRegressError: no such directory or machine, or no loadable results.
        """
        return results.load_results(self.root, repo=self.repo, machine=self.machine)

    def series(self, higher_is_better: Sequence[str] = ()) -> list[Series]:
        """Every series the store holds, in history order (`results.series_from_frame`)."""
        return results.series_from_frame(self.frame(), higher_is_better=higher_is_better)

    def commits(self) -> set[str]:
        """The commits the store holds results for (none while it holds nothing)."""
        try:
            return set(self.frame()["commit"])
        except SpyreRegressError:  # no results yet
            return set()

    # -- the documents --------------------------------------------------------------------
    def documents(self) -> Iterator[dict[str, Any]]:
        """Each result document of the machine (of every machine when the store names
        none) that parses, in path order."""
        for path in sorted(self.root.glob(f"{self.machine or '*'}/*.json")):
            if path.name == "machine.json":
                continue
            try:
                yield asv_documents.open_document(path)
            except asv_documents.UnreadableDocument:
                continue  # left out, as asv leaves it; reading the series says why

    def benchmarks(self) -> dict[str, dict[str, Any]]:
        """`benchmarks.json`'s entry per benchmark ({} where the store has none usable)."""
        listed = self.root / "benchmarks.json"
        return results.benchmarks_meta(listed) if listed.exists() else {}

    def param_names(self) -> dict[str, tuple[str, ...]]:
        """Each benchmark's parameter names, from `benchmarks.json`.

        Raises:
            SpyreRegressError: the store has no readable benchmark list.
        """
        try:
            meta = asv_documents.open_document(self.root / "benchmarks.json")
        except asv_documents.UnreadableDocument as error:
            raise SpyreRegressError(f"asv benchmark list {error}; pass the results directory "
                                    "asv wrote (`results_dir` in asv.conf.json, e.g. "
                                    ".asv/results)") from None
        return {name: tuple(entry.get("param_names") or ()) for name, entry in meta.items()
                if isinstance(entry, dict)}

    def benchmarks_by_commit(self) -> dict[str, set[str]]:
        """Per commit, the benchmarks the store has a result row for."""
        found: dict[str, set[str]] = {}
        for document in self.documents():
            found.setdefault(str(document.get("commit_hash", "")), set()).update(
                name for name, _ in rows(document))
        return found

    def samples_at(self, commit: str) -> Samples:
        """What the store holds for one commit of its machine: (benchmark, params) -> its
        samples (or its one value when asv kept no samples), None where the benchmark
        failed; skipped points left out. The nightly reads it before and after `asv run
        --append-samples` to learn what a re-measurement added."""
        meta = self.benchmarks()
        found: Samples = {}
        read = []
        for path in sorted((self.root / str(self.machine)).glob(f"{commit[:8]}-*.json")):
            columns = Columns()
            read_file(path, str(self.machine), meta, columns)
            read.append(columns)
            found.update(point_samples(columns, commit))
        log_skipped(*read)
        return found

    def durations(self) -> dict[str, list[float]]:
        """Each benchmark's durations as asv recorded them, one per result document that
        has one (seconds)."""
        totals: dict[str, list[float]] = {}
        for document in self.documents():
            for name, cells in rows(document):
                duration = cells.get("duration")
                if isinstance(duration, int | float):
                    totals.setdefault(name, []).append(float(duration))
        return totals

    def mean_seconds(self) -> dict[str, float]:
        """Each benchmark's mean duration over the store's documents (seconds)."""
        return {name: sum(values) / len(values) for name, values in self.durations().items()}

    def costs(self) -> Costs:
        """Re-measurement's prices on the store's machine, from what asv recorded there: per
        benchmark the median over result documents of its duration divided by the samples
        that run took, the median `<build>` seconds as the price of a run at a commit, and
        each setup_cache's median seconds for the benchmarks that share its key
        (benchmarks.json's `setup_cache_key`). asv's own start-up is not recorded:
        re-measurement learns it from its first round (`Costs.wall_clock`)."""
        per_sample: dict[str, list[float]] = {}
        builds: list[float] = []
        caches: dict[str, list[float]] = {}
        for document in self.documents():
            if not _shaped(document):
                continue  # load_results says why; a price is only an estimate
            for name, cells in rows(document):
                duration, taken = cells.get("duration"), _samples_taken(cells)
                if isinstance(duration, int | float) and taken:
                    per_sample.setdefault(name, []).append(duration / taken)
            durations = document.get("durations")
            for key, seconds in (durations.items() if isinstance(durations, dict) else ()):
                if not isinstance(seconds, int | float):
                    continue
                if key == "<build>":
                    builds.append(seconds)
                elif key.startswith("<setup_cache ") and key.endswith(">"):
                    caches.setdefault(key[len("<setup_cache "):-1], []).append(seconds)
        setup = {name: (key, float(np.median(caches[key])))
                 for name, entry in self.benchmarks().items()
                 if (key := entry.get("setup_cache_key")) in caches}
        return Costs(per_sample={name: float(np.median(v)) for name, v in per_sample.items()},
                     per_run=float(np.median(builds)) if builds else 0.0, setup_cache=setup,
                     wall_clock=True)

    def snapshot(self) -> asv_documents.Store:
        """The whole directory read into memory, to be merged into another store (what a
        worker's run or a shard wrote).

        Raises:
            asv_documents.MergeRefused: not a results directory, or a document that does not
                parse.
        """
        return asv_documents.read_store(self.root)

    # -- what is written ------------------------------------------------------------------
    def merge(self, stores: Sequence[asv_documents.Store]) -> asv_documents.Merged:
        """Results other runs wrote (a worker's, a shard's) merged in
        (`asv_documents.merge_into`): everything is checked before anything is written.

        Raises:
            asv_documents.MergeRefused: a machine, a document or a benchmark's version that
                does not match.
        """
        return asv_documents.merge_into(self.root, stores)


def rows(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each benchmark row of a result document, its cells by column name; nothing for a
    document that is not shaped as asv writes them (`load_results` says why)."""
    if not _shaped(document):
        return
    columns = document["result_columns"]
    for name, row in document["results"].items():
        if isinstance(row, list):
            yield name, dict(zip(columns, row, strict=False))


def _shaped(document: dict[str, Any]) -> bool:
    """Whether a document has asv's rows: `result_columns` and `results`."""
    return isinstance(document.get("result_columns"), list) and isinstance(
        document.get("results"), dict)


def document_samples(store: asv_documents.Store) -> dict[tuple[str, str, str], tuple[
        float, ...] | None]:
    """What a store read into memory (a worker's run) holds: (commit, benchmark, params) ->
    samples, as `ResultsStore.samples_at` gives them for a file."""
    found: dict[tuple[str, str, str], tuple[float, ...] | None] = {}
    read = []
    for (machine, file), document in store.results.items():
        columns = Columns()
        read_document(document, machine, store.benchmarks, columns, source=file)
        read.append(columns)
        commit = str(document.get("commit_hash", ""))
        found.update(((commit, benchmark, params), samples)
                     for (benchmark, params), samples in point_samples(columns).items())
    log_skipped(*read)
    return found


def point_samples(columns: Columns, commit: str | None = None) -> Samples:
    """(benchmark, params) -> samples (or the one value), None where it failed, of the
    points read into `columns` (of `commit` only, when given); skipped ones left out."""
    points = columns.frame()
    found: Samples = {}
    for benchmark, params, status, samples, value, at in zip(
            points["benchmark"], points["params"], points["status"], points["samples"],
            points["value"], points["commit"], strict=True):
        if (commit is not None and at != commit) or status == "skipped":
            continue
        found[benchmark, params] = None if status == "failed" \
            else tuple(samples) if samples else (value,)
    return found


def _samples_taken(cells: dict[str, Any]) -> int:
    """Samples a result row holds over its parameter combinations (one per measured value
    where asv kept no samples)."""
    samples = cells.get("samples")
    if isinstance(samples, list) and any(isinstance(s, list) for s in samples):
        return sum(len(s) for s in samples if isinstance(s, list))
    values = cells.get("result")
    return sum(isinstance(v, int | float) and v == v for v in values) \
        if isinstance(values, list) else 0  # NaN: a combination asv did not run
