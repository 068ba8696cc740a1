"""The results store: every reader of asv's result documents goes through it, and what it
reads agrees with the table detection loads (`results.load_results`) on the fixture store."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from regressions.records import asv_documents, results
from regressions.records.results_store import ResultsStore, document_samples

FIXTURE = Path(__file__).parent / "fixtures" / "asv_results"


def test_the_store_reads_what_detection_loads():
    store = ResultsStore(FIXTURE, "fixture")
    frame = results.load_results(FIXTURE, machine="fixture")
    assert store.commits() == set(frame["commit"]) and len(store.commits()) == 8
    rows = {(c, b) for c, b in zip(frame["commit"], frame["benchmark"], strict=True)}
    held = store.benchmarks_by_commit()
    assert {(c, b) for c, names in held.items() for b in names} == rows
    assert [s.name for s in store.series()] == [s.name for s in results.series_from_frame(frame)]
    assert set(store.param_names()) == set(json.loads((FIXTURE / "benchmarks.json").read_text())
                                           ) - {"version"}


def test_a_commits_samples_read_from_files_and_from_a_workers_documents_agree():
    store = ResultsStore(FIXTURE, "fixture")
    commit = sorted(store.commits())[0]
    from_files = store.samples_at(commit)
    from_documents = document_samples(store.snapshot())
    assert from_files and {(b, p): s for (c, b, p), s in from_documents.items()
                           if c == commit} == from_files


def test_durations_and_their_means_are_per_benchmark(tmp_path):
    document = asv_documents.new_document("a" * 40, "env", 0, "m")
    for name, duration in (("bench_a.time_x", 2.0), ("bench_b.time_y", 6.0)):
        row = asv_documents.new_row([], "1")
        asv_documents.set_result(row, 0, [1.0, 1.1])
        row[asv_documents.RESULT_COLUMNS.index("duration")] = duration
        document["results"][name] = row
    for commit in ("a" * 40, "b" * 40):
        path = asv_documents.result_path(tmp_path, "m", commit, "env")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**document, "commit_hash": commit}))
    (tmp_path / "m" / "broken-env.json").write_text("{not json")  # left out, as asv does
    store = ResultsStore(tmp_path)
    assert store.durations() == {"bench_a.time_x": [2.0, 2.0], "bench_b.time_y": [6.0, 6.0]}
    assert store.mean_seconds() == {"bench_a.time_x": 2.0, "bench_b.time_y": 6.0}
    assert store.benchmarks_by_commit() == {c: {"bench_a.time_x", "bench_b.time_y"}
                                           for c in ("a" * 40, "b" * 40)}


def test_an_empty_store_holds_no_commits(tmp_path):
    assert ResultsStore(tmp_path / "nowhere", "m").commits() == set()


def test_a_workers_unreadable_documents_are_one_warning_line(caplog):
    store = ResultsStore(FIXTURE, "fixture").snapshot()
    broken = {("fixture", f"{n:08x}-env.json"): {"version": 99, "commit_hash": f"{n:040x}"}
              for n in range(3)}
    with caplog.at_level("WARNING", logger="regressions"):
        found = document_samples(replace(store, results={**store.results, **broken}))
    assert found == document_samples(store)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "skipped 3 of" in warnings[0], warnings
