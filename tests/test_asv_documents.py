"""asv result documents: written in one place, merged from shards without losing or doubling a
sample, and refused where two runs measured different machines or different code."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest

from regressions.probing.protocol import BenchAnswer
from regressions.records import asv_documents, results
from regressions.records.asv_documents import MergeRefused, Store, UnreadableDocument
from regressions.records.results_store import ResultsStore

FIXTURE = Path(__file__).parent / "fixtures" / "asv_results"


def split(store: Store, predicate) -> tuple[Store, Store]:
    """The store cut in two by benchmark name, as two CI shards would have written it."""
    halves = []
    for keep in (predicate, lambda name: not predicate(name)):
        documents = {}
        for key, document in store.results.items():
            part = copy.deepcopy(document)
            part["results"] = {n: r for n, r in part["results"].items() if keep(n)}
            documents[key] = part
        halves.append(Store(f"{store.source}-part", store.benchmarks, store.machines,
                            documents))
    return halves[0], halves[1]


def frame_of(path: Path):
    return results.load_results(path).drop(columns=["position"]).sort_values(
        ["machine", "benchmark", "params", "commit"], ignore_index=True)


def test_two_disjoint_shards_merge_into_the_unsharded_store(tmp_path):
    first, second = split(asv_documents.read_store(FIXTURE), lambda n: "execute" in n)
    assert first.results and all(d["results"] for d in second.results.values())
    merged = asv_documents.merge_into(tmp_path / "merged", [first, second])
    assert merged.machines == ("fixture",)
    expected, got = frame_of(FIXTURE), frame_of(tmp_path / "merged")
    assert len(got) == len(expected) > 0
    for column in ("benchmark", "params", "commit", "status", "samples", "value"):
        assert got[column].tolist() == pytest.approx(expected[column].tolist(), nan_ok=True) \
            if column == "value" else got[column].tolist() == expected[column].tolist()


def the_timed_row(document: dict) -> str:
    return next(n for n, row in document["results"].items()
                if dict(zip(document["result_columns"], row, strict=False)).get("samples"))


def test_a_remeasured_benchmark_gets_its_samples_appended_once(tmp_path):
    store = asv_documents.read_store(FIXTURE)
    key, document = next(iter(store.results.items()))
    name = the_timed_row(document)
    again = copy.deepcopy(document)
    again["results"] = {name: again["results"][name]}
    cells = dict(zip(again["result_columns"], again["results"][name], strict=False))
    cells["started_at"] += 1  # a later run of the same benchmark
    cells["samples"] = [[s * 2 for s in samples] if samples else samples
                        for samples in cells["samples"]]
    again["results"][name] = [cells.get(c) for c in again["result_columns"]]
    rerun = Store("rerun", store.benchmarks, store.machines, {key: again})
    into = tmp_path / "store"
    asv_documents.merge_into(into, [store])
    asv_documents.merge_into(into, [rerun])
    asv_documents.merge_into(into, [rerun])  # a second delivery of the same run: no change
    merged = json.loads((into / key[0] / key[1]).read_text())
    row = dict(zip(merged["result_columns"], merged["results"][name], strict=False))
    original = dict(zip(document["result_columns"], document["results"][name], strict=False))
    for index, samples in enumerate(original["samples"]):
        if samples:
            assert row["samples"][index] == samples + [s * 2 for s in samples]
            assert row["stats_repeat"][index] == 2 * len(samples)
            assert row["result"][index] == pytest.approx(sorted(row["samples"][index])[
                len(row["samples"][index]) // 2], rel=0.2)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d, name: d["params"].update(cpu="another CPU"), "`params.cpu`"),
    (lambda d, name: d["results"][name].__setitem__(
        d["result_columns"].index("version"), "other"), "has `version` 'other'"),
    (lambda d, name: d.update(version=1), "results format `version` 1"),
])
def test_a_merge_of_other_machines_or_other_code_is_refused_and_writes_nothing(
        tmp_path, change, message):
    store = asv_documents.read_store(FIXTURE)
    into = tmp_path / "store"
    asv_documents.merge_into(into, [store])
    before = {p: p.read_bytes() for p in into.rglob("*.json")}
    key, document = next(iter(store.results.items()))
    other = copy.deepcopy(document)
    change(other, the_timed_row(other))
    with pytest.raises(MergeRefused, match=message) as refused:
        asv_documents.merge_into(into, [store, Store("shard-b", store.benchmarks,
                                                     store.machines, {key: other})])
    assert f"shard-b/{key[0]}/{key[1]}" in str(refused.value)
    assert {p: p.read_bytes() for p in into.rglob("*.json")} == before


def test_a_machine_described_differently_is_refused(tmp_path):
    store = asv_documents.read_store(FIXTURE)
    into = tmp_path / "store"
    asv_documents.merge_into(into, [store])
    other = Store("shard-c", store.benchmarks,
                  {name: {**m, "cpu": "another CPU"} for name, m in store.machines.items()},
                  {})
    with pytest.raises(MergeRefused, match="name the machines apart"):
        asv_documents.merge_into(into, [other])


def test_an_unreadable_asv_file_is_left_out_by_readers_and_never_written_over(tmp_path, caplog):
    """One way to open an asv file and one policy for one that cannot be read
    (`asv_documents.open_document`): readers of the store leave it out and its series' read
    says so once; a write into it and a merge of it refuse, and the file stays as it was."""
    store = tmp_path / "store"
    asv_documents.merge_into(store, [asv_documents.read_store(FIXTURE)])
    machine = next(p for p in store.iterdir() if p.is_dir())
    readable = len(list(ResultsStore(store).documents()))
    broken = machine / "deadbeef-virtualenv-py3.11.json"
    broken.write_text("{not json")
    with pytest.raises(UnreadableDocument, match="deadbeef.*not readable JSON"):
        asv_documents.open_document(broken)
    (machine / "0badf00d-virtualenv-py3.11.json").write_text("[1, 2]")
    with pytest.raises(UnreadableDocument, match="not a JSON object"):
        asv_documents.open_document(machine / "0badf00d-virtualenv-py3.11.json")

    assert len(list(ResultsStore(store).documents())) == readable
    with caplog.at_level(logging.WARNING, logger="regressions.records.result_columns"):
        assert not ResultsStore(store).frame()["commit"].str.startswith("deadbeef").any()
    assert [r.message for r in caplog.records if r.levelno == logging.WARNING] == [
        f"skipped 2 of {readable + 2} result file(s) (e.g. {machine / '0badf00d'}"
        "-virtualenv-py3.11.json: not an asv JSON document (not a JSON object)); --verbose "
        "lists each"]

    answer = BenchAnswer(status="ok", samples=(1.0,), deterministic=False)
    with pytest.raises(UnreadableDocument, match="deadbeef"):
        asv_documents.record_measurement(store, machine=machine.name,
                                         env_name="virtualenv-py3.11", commit="deadbeef" * 5,
                                         commit_date_ms=0, benchmark="b.f", measured=answer)
    assert broken.read_text() == "{not json"
    with pytest.raises(MergeRefused, match="0badf00d.*not a JSON object"):
        asv_documents.read_store(store)
