"""The suites shipped for external checkouts (suites/, spyre_regress/suites.py): written out
for a checkout, and the torch-spyre suite's own pieces (its round-shared measurements).
Compiling with torch-spyre is tested on its history (tests/e2e/test_torch_spyre*.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from regressions.errors import SpyreRegressError
from regressions.probing import suite
from spyre_regress import suites


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "project"
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(repo)], check=True)
    (repo / "x.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(repo), "add", "x.py"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "-m", "one"], check=True)
    return repo


# asv_runner's discovery: `benchmarks` importable from its parent, nothing else on the path
ASV_IMPORT = """
import importlib, importlib.machinery, os, sys
root = sys.argv[1]
class Only:
    def find_spec(self, fullname, path, target=None):
        if fullname == os.path.basename(root):
            return importlib.machinery.PathFinder().find_spec(fullname, [os.path.dirname(root)])
sys.meta_path.insert(0, Only())
importlib.import_module("benchmarks")
import spyre_sim
print(os.path.dirname(spyre_sim.__file__))
"""


def test_a_written_suite_measures_the_checkout_through_its_backend(checkout, tmp_path):
    out = suites.write("torch_spyre", checkout, tmp_path / "bench", "main")
    config = (out / "asv.conf.json").read_text()
    assert f'"repo": {json.dumps(str(checkout.resolve()))}' in config
    assert '"branches": ["main"]' in config and "@" not in config.split("{", 1)[1]
    benchmarks = {p.name for p in (out / "benchmarks").iterdir()}
    assert {"torch_spyre.py", "torch_spyre_stand_in.py", "torch_spyre_layout.py",
            "torch_spyre_sdsc.py", "torch_spyre_timing.py", "inductor.py", "clocks.py",
            "compile_work.py", "compile_work_child.py", "workloads.py", "bench_compile.py",
            "bench_execute.py"} <= benchmarks
    assert (out / "torch_spyre_install.py").is_file()
    # the timing model the device-time rows price with, where asv's path finds it: asv puts
    # only the benchmarks package on the path (its own importer), as this child does
    assert (out / "spyre_sim" / "cost.py").is_file() and (out / "spyre_sim" / "device.py").is_file()
    found = subprocess.run([sys.executable, "-P", "-c", ASV_IMPORT, str(out / "benchmarks")],
                           cwd=tmp_path, capture_output=True, text=True, check=False,
                           env={"PATH": os.environ["PATH"]})
    assert found.returncode == 0 and found.stdout.strip() == str(out / "spyre_sim"), found.stderr
    # the tool reads its history from the checkout, its catalogue from the suite
    assert suite.history_repo(out) == checkout.resolve()
    assert suite.backend_name(out) == "torch_spyre"


def test_the_written_suite_s_measuring_files_import_each_other_from_the_suite(checkout,
                                                                              tmp_path):
    """The clocks module reads the parts of a compile's wall time with its sibling waits.py
    (`clocks.waits`): both are copied, and they import from the written suite alone (no
    site-packages, where this tool's own `benchmarks` could stand in for a missing file)."""
    out = suites.write("torch_spyre", checkout, tmp_path / "bench", "main")
    code = ("import sys; sys.path.insert(0, '.'); import benchmarks.clocks as c; "
            "print(c.waits.__file__)")
    found = subprocess.run([sys.executable, "-S", "-P", "-c", code], cwd=out,
                           capture_output=True, text=True, check=False,
                           env={"PATH": os.environ["PATH"]})
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == out / "benchmarks" / "waits.py"


def test_writing_again_replaces_the_benchmarks_and_keeps_asvs_results(checkout, tmp_path):
    out = suites.write("torch_spyre", checkout, tmp_path / "bench", "main")
    (out / "benchmarks" / "stale.py").write_text("")
    (out / ".asv" / "results").mkdir(parents=True)
    (out / ".asv" / "results" / "kept.json").write_text("{}")
    suites.write("torch_spyre", checkout, out, "main")
    assert not (out / "benchmarks" / "stale.py").exists()
    assert (out / ".asv" / "results" / "kept.json").is_file()


def test_bad_input_is_refused_naming_the_fix(checkout, tmp_path):
    with pytest.raises(SpyreRegressError, match="no suite named 'tvm'; shipped: torch_spyre"):
        suites.write("tvm", checkout, tmp_path / "a", "main")
    with pytest.raises(SpyreRegressError, match="not a git repository"):
        suites.write("torch_spyre", tmp_path, tmp_path / "b", "main")
    with pytest.raises(SpyreRegressError):
        suites.write("torch_spyre", checkout, tmp_path / "c", "no-such-branch")
    (tmp_path / "file").write_text("")
    with pytest.raises(SpyreRegressError, match="is a file"):
        suites.write("torch_spyre", checkout, tmp_path / "file", "main")


def test_a_suite_whose_config_names_a_url_or_a_missing_checkout_is_refused(tmp_path):
    (tmp_path / "asv.conf.json").write_text('{"repo": "https://example.invalid/x.git"}')
    with pytest.raises(SpyreRegressError, match="a URL; clone it"):
        suite.history_repo(tmp_path)
    (tmp_path / "asv.conf.json").write_text('// a comment\n{"repo": "../gone"}')
    with pytest.raises(SpyreRegressError, match="does not exist"):
        suite.history_repo(tmp_path)
    (tmp_path / "asv.conf.json").write_text('{"repo": "."}')
    assert suite.history_repo(tmp_path) == tmp_path.resolve()


@pytest.mark.slow  # over 4 s: mypy on the written suite
def test_the_written_suite_type_checks_beside_the_modules_it_imports(checkout, tmp_path):
    """The suite's modules import the backend and the tool's measuring files as their own
    package's (`from benchmarks import torch_spyre`); they are checked where they run (the
    files copied from the tool are checked in the tool's own run)."""
    out = suites.write("torch_spyre", checkout, tmp_path / "bench", "main")
    own = sorted(f"benchmarks/{p.name}" for p in (suites.shipped()["torch_spyre"] /
                                                  "benchmarks").glob("*.py"))
    done = subprocess.run([sys.executable, "-m", "mypy", "--explicit-package-bases",
                           "--ignore-missing-imports", "--check-untyped-defs",
                           "--follow-imports=silent", *own],
                          cwd=out, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MYPYPATH": str(out)})
    assert done.returncode == 0, done.stdout[-3000:]


def _load_compiled(out: Path, monkeypatch):
    """The suite's `compiled` module with a stand-in backend (no torch-spyre here): its
    measurement bookkeeping, apart from what it measures."""
    import importlib
    import types

    monkeypatch.syspath_prepend(str(out))
    for name in [n for n in sys.modules if n == "benchmarks" or n.startswith("benchmarks.")]:
        monkeypatch.delitem(sys.modules, name)
    backend = types.ModuleType("benchmarks.torch_spyre")
    backend.HEAD, backend.TAIL = ("dynamo",), ("codegen",)  # type: ignore[attr-defined]
    backend.checkout_passes = lambda: ("p1",)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "benchmarks.torch_spyre", backend)
    return importlib.import_module("benchmarks.compiled")


def test_every_row_of_a_point_reads_one_compile_per_round(checkout, tmp_path, monkeypatch):
    out = suites.write("torch_spyre", checkout, tmp_path / "bench", "main")
    compiled = _load_compiled(out, monkeypatch)
    compiles = []

    def compile_seconds(name: str, seq: int) -> dict:
        compiles.append((name, seq))
        return {"seconds": {"dynamo": float(len(compiles)), "p1": 0.5, "codegen": 2.0,
                            "total": 10.0}, "device": {"seconds": 4e-5, "unmodelled": 1}}

    monkeypatch.setattr(compiled, "compile_seconds", compile_seconds)
    monkeypatch.chdir(tmp_path)
    assert compiled.STAGES == ("dynamo", *compiled.KNOWN_PASSES, "p1", "codegen")
    first = [compiled.sample("mlp", 128, f"stage:{s}") for s in ("dynamo", "p1", "codegen")]
    assert first == [1.0, 0.5, 2.0] and len(compiles) == 1  # one compile, three rows
    assert compiled.sample("mlp", 128, "total:total") == 10.0 and len(compiles) == 1
    assert compiled.sample("mlp", 128, "stage:dynamo") == 2.0  # its second round: compiled
    assert len(compiles) == 2
    assert compiled.sample("mlp", 128, "stage:span_reduction") is None  # not at this commit
    # the device-time rows read the same compiles' modelled device program
    assert compiled.sample("mlp", 128, "device:seconds") == 4e-5
    assert compiled.sample("mlp", 128, "device:unmodelled") == 1 and len(compiles) == 2
    monkeypatch.setattr(compiled, "compile_seconds", lambda name, seq: {
        "seconds": {"total": 1.0}, "device": {"failure": "ImportError: no spyre_sim"}})
    assert compiled.sample("softmax", 128, "total:total") == 1.0
    with pytest.raises(RuntimeError, match="no spyre_sim"):
        compiled.sample("softmax", 128, "device:seconds")
    monkeypatch.setattr(compiled, "compile_seconds",
                        lambda name, seq: {"failure": "torch-spyre failed in lowering: X"})
    with pytest.raises(RuntimeError, match="failed in lowering"):
        compiled.sample("swiglu", 128, "stage:dynamo")
