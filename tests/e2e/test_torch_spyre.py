"""torch-spyre's real front half compiled through its backend module (backends/torch_spyre.py)
on a clone of its history: every stage timed, captures that repeat byte for byte, failures
classed, and the oldest commit of the range (torch 2.13's upgrade) compiled too.

Needs torch-spyre's history (SPYRE_REGRESS_TORCH_SPYRE_BUNDLE; tests/conftest.py): CI sets it,
elsewhere these tests skip and say how to run them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backends import interface
from suites import __file__ as suites_init

pytestmark = pytest.mark.slow

BACKEND = interface.module_path("torch_spyre")
CATALOGUE = Path(suites_init).parent / "torch_spyre" / "benchmarks" / "workloads.py"
OLDEST = "930e9f7"  # "Upgrade to pytorch 2.13 (#3374)": where the range starts

PRELUDE = f"""
import importlib.util, json, sys
from pathlib import Path
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
backend = load("spyre_regress_backend", {str(BACKEND)!r})
workloads = load("workloads", {str(CATALOGUE)!r})
"""


def in_checkout(checkout: Path, code: str, timeout: float = 600) -> dict:
    """Run `code` after PRELUDE with the checkout's torch-spyre on the path, as a probe
    does; the JSON it prints last."""
    done = subprocess.run([sys.executable, "-P", "-c", PRELUDE + code], capture_output=True,
                          text=True, timeout=timeout,
                          env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin",
                               "OMP_NUM_THREADS": "1", "HOME": str(checkout.parent)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


COMPILE = """
compiled = backend.compile(*workloads.build("mlp", 128))
print(json.dumps({"stages": list(backend.STAGES), "seconds": compiled.compile_s,
                  "environment": backend.environment()}))
"""


def test_every_stage_of_a_compile_is_timed_and_the_stages_add_up(torch_spyre_checkout):
    found = in_checkout(torch_spyre_checkout, COMPILE)
    stages, seconds = found["stages"], found["seconds"]
    assert stages[:4] == ["dynamo", "aot", "post_grad", "lowering"]
    assert stages[-2:] == ["scheduling", "codegen"]
    assert {"optimize_restickify_locations", "_distribute_work",
            "_maybe_scratchpad_planning"} <= set(stages)
    assert len(stages) == 4 + 20 + 2  # the bundle's head has 20 pre-scheduling passes
    assert seconds["total"] == pytest.approx(sum(seconds[s] for s in stages), rel=1e-6)
    assert seconds["codegen"] > 0 and seconds["dynamo"] > 0
    assert found["environment"]["torch_spyre._C"] == "stand-in (spyre-regress)"
    assert found["environment"]["dxp_standalone"] == "stub (spyre-regress)"


CAPTURE = """
directory = backend.capture(*workloads.build("attention", 128), None, Path(sys.argv[-1]))
print(json.dumps({"directory": str(directory)}))
"""


def test_two_captures_in_two_processes_write_the_same_texts(torch_spyre_checkout, tmp_path):
    """Source locations, kernel directory names, pids and process-wide counters stay out of
    the canonical texts; the SDSC keeps its decisions and loses its provenance."""
    written = []
    for run in ("first", "second"):
        code = CAPTURE.replace("sys.argv[-1]", repr(str(tmp_path / run)))
        written.append(Path(in_checkout(torch_spyre_checkout, code)["directory"]))
    texts = [{p.name: p.read_text() for p in sorted(d.glob("*.txt"))} for d in written]
    assert texts[0] == texts[1]
    codegen = texts[0][next(n for n in texts[0] if n.endswith("-codegen.txt"))]
    assert '"numCoresUsed_"' in codegen and "debug_handle" not in codegen
    assert str(torch_spyre_checkout) not in "".join(texts[0].values())
    index = json.loads((written[0] / "stages.json").read_text())
    assert index["backend"] == "torch_spyre" and index["version"] == 1


BROKEN = """
try:
    backend.compile(*workloads.build("softmax", 128))
except backend.CompileFailure as failure:
    print(json.dumps({"kind": failure.kind, "stage": failure.stage, "text": str(failure)}))
"""


def test_a_compile_that_fails_in_a_pass_is_classed_with_the_pass(torch_spyre_checkout,
                                                                 tmp_path):
    broken = tmp_path / "broken"
    subprocess.run(["git", "clone", "-q", str(torch_spyre_checkout), str(broken)], check=True)
    passes = broken / "torch_spyre" / "_inductor" / "work_division.py"
    source = passes.read_text()
    marker = "def span_reduction(graph"
    assert source.count(marker) == 1
    head, rest = source.split(marker)
    body_start = rest.index(":\n") + 2
    passes.write_text(head + marker + rest[:body_start]
                      + "    raise RuntimeError('planted: span reduction refuses')\n"
                      + rest[body_start:])
    found = in_checkout(broken, BROKEN)
    assert found["kind"] == "torch-spyre" and found["stage"] == "span_reduction"
    assert found["text"].startswith("torch-spyre failed in span_reduction: ")
    assert "planted: span reduction refuses" in found["text"]
    assert "TORCHDYNAMO_VERBOSE" not in found["text"]  # Inductor's advice is not the error


def test_the_oldest_commit_of_the_range_compiles_with_its_seventeen_passes(
        torch_spyre_checkout, tmp_path):
    oldest = tmp_path / "oldest"
    subprocess.run(["git", "clone", "-q", str(torch_spyre_checkout), str(oldest)], check=True)
    subprocess.run(["git", "-C", str(oldest), "checkout", "-q", OLDEST], check=True)
    found = in_checkout(oldest, COMPILE)
    assert len(found["stages"]) == 4 + 17 + 2
    assert "validate_named_dims" not in found["stages"]  # added later in the range


def test_the_stand_in_provides_every_extension_name_the_head_uses(torch_spyre_checkout):
    sys.path.insert(0, str(BACKEND.parent))
    try:
        import torch_spyre_stand_in  # noqa: PLC0415 (the backends folder, by path)
    finally:
        sys.path.remove(str(BACKEND.parent))
    package = torch_spyre_checkout / "torch_spyre"
    assert len(torch_spyre_stand_in.imported_names(package)) >= 25
    assert torch_spyre_stand_in.missing_names(package) == {}
