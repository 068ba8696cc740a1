"""Grids kept by what they depend on: where, when computed again, and the numerics grid's
document (the compile-work family's use is pinned in test_compile_work.py)."""

import json

import pytest

from benchmarks import bench_numerics, kept


def test_the_cache_lives_in_the_users_cache_unless_moved_or_off(monkeypatch, tmp_path):
    monkeypatch.delenv(kept.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kept.cache_dir("numerics") == tmp_path / "xdg" / "spyre-regress" / "numerics"
    monkeypatch.setenv(kept.CACHE_ENV, str(tmp_path / "elsewhere"))
    assert kept.cache_dir("numerics") == tmp_path / "elsewhere" / "numerics"
    monkeypatch.setenv(kept.CACHE_ENV, "off")
    assert kept.cache_dir("numerics") is None


def test_a_grid_is_computed_once_per_key_and_again_when_its_document_is_unreadable(
        monkeypatch, tmp_path):
    monkeypatch.setenv(kept.CACHE_ENV, str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"value": len(calls)}

    def decode(document):
        if document.get("version") != 1:
            raise ValueError("another version")
        return {"value": document["value"]}

    def encode(value):
        return {"version": 1, **value}

    def grid(key):
        return kept.kept("family", key, compute, encode, decode=decode)

    assert grid("a") == grid("a") == {"value": 1}
    assert grid("b") == {"value": 2}
    (tmp_path / "family" / "a.json").write_text(json.dumps({"version": 0, "value": 9}))
    assert grid("a") == {"value": 3}  # another format version: computed again, kept anew
    (tmp_path / "family" / "a.json").write_text("{not json")
    assert grid("a") == {"value": 4}
    assert grid(None) == {"value": 5} and grid(None) == {"value": 6}  # no key: never kept
    assert not list((tmp_path / "family").glob("*.tmp"))


def test_the_processor_is_named_by_its_model_and_features():
    assert kept.processor()  # Linux: model name and flags from /proc/cpuinfo


def test_the_numerics_grid_document_round_trips_values_and_failures():
    values = {("softmax", 1, "kernel"): {"max_abs": 0.5, "max_rel": 0.1},
              ("softmax", 1, "runtime"): {"nonfinite": "k0_exp (op exp, stage runtime)"},
              ("mlp", 127): "RuntimeError: boom"}
    document = json.loads(json.dumps(bench_numerics.grid_document(values)))
    assert bench_numerics.grid_values(document) == values
    with pytest.raises(ValueError, match="version"):
        bench_numerics.grid_values({**document, "version": 0})


def test_the_numerics_family_reads_a_kept_grid_without_computing_it(monkeypatch, tmp_path):
    monkeypatch.setenv(kept.CACHE_ENV, str(tmp_path))
    computed = []

    def grid(*args):
        computed.append(args)
        return {("softmax", 1, "kernel"): {"max_abs": float(len(computed))}}

    monkeypatch.setattr(bench_numerics, "numerics_grid", grid)
    first = bench_numerics.kept_grid(["softmax"], [1], ["kernel"])
    assert bench_numerics.kept_grid(["softmax"], [1], ["kernel"]) == first
    assert len(computed) == 1
    bench_numerics.kept_grid(["softmax"], [1, 127], ["kernel"])  # another grid: computed
    assert len(computed) == 2
