"""Capture, fallbacks, graph breaks, errors, torch.compile registration and debug capture."""

import dataclasses
import json
import warnings

import pytest
import torch

import spyre_sim
from spyre_sim import graph_builder
from spyre_sim.config import Config
from spyre_sim.stages import backend, decompose, dynamo, kernel, layout, lower, runtime, sdsc
from tests.conftest import compile_workload


def test_graph_breaks_give_two_graphs_and_correct_results():
    def program(x):
        y = torch.relu(x) * 2
        torch._dynamo.graph_break()
        return torch.softmax(y, -1)

    x = torch.randn(8, 64)
    compiled = spyre_sim.compile(program, (x,))
    assert len(compiled.graphs) == 2
    assert "1 graph break(s)" in compiled.artifacts["dynamo"]
    result = compiled.run(x)
    torch.testing.assert_close(result.outputs[0], program(x), atol=2e-3, rtol=2e-3)
    assert [k.name.split("/")[0] for k in result.kernels] == ["g0", "g1"]


def test_torch_compile_backend_is_registered():
    assert "spyre" in torch._dynamo.list_backends()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU()).eval()
    compiled = torch.compile(model, backend="spyre")
    x = torch.randn(4, 64)
    before = spyre_sim.device_clock()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=3e-3, rtol=3e-3)
    assert spyre_sim.device_clock() > before


def test_fallback_warns_once_and_stays_correct(recwarn):
    graph_builder._warned.discard("fallback:aten.embedding.default")
    warnings.simplefilter("always")
    compiled, model, inputs = compile_workload("embedding", 16, 64)
    compiled_again, _, _ = compile_workload("embedding", 16, 64)
    messages = [str(w.message) for w in recwarn
                if issubclass(w.category, spyre_sim.FallbackWarning)]
    assert messages == ["torch.ops.aten.embedding is falling back to cpu"]
    result = compiled.run(*inputs)
    with torch.no_grad():
        torch.testing.assert_close(result.outputs[0], model(*inputs), atol=3e-3, rtol=3e-3)
    transfers = [e["cat"] for e in result.trace["traceEvents"] if e.get("cat") in ("d2h", "h2d")]
    assert transfers == ["d2h", "d2h", "h2d"]


@pytest.mark.parametrize("value", ["0", "33", "many"])
def test_bad_sencores_is_rejected(monkeypatch, value):
    monkeypatch.setenv("SENCORES", value)
    with pytest.raises(spyre_sim.SpyreConfigError, match=r"SENCORES.*1\.\.32"):
        Config()


def test_sencores_sets_the_cores(monkeypatch):
    monkeypatch.setenv("SENCORES", "4")
    compiled, _, inputs = compile_workload("mlp", 128, 256)
    cores = [k.cores for k in compiled.run(*inputs).kernels]
    assert max(cores) == 4


def test_unsupported_dtype_names_it():
    x = torch.randn(4, 64, dtype=torch.float64)
    with pytest.raises(spyre_sim.SpyreCompileError, match="float64 is not supported"):
        spyre_sim.compile(torch.exp, (x,))


def test_unsupported_op_names_op_stage_and_shape():
    x = torch.randn(4, 64)
    with pytest.raises(spyre_sim.SpyreCompileError) as failure:
        spyre_sim.compile(lambda t: torch.fft.rfft(t), (x,))
    assert failure.value.stage == "decompose"
    assert "fft" in failure.value.op and "[4, 64]" in str(failure.value)


def _stages_to_layout(fn, inputs, config):
    artifact, _, _ = dynamo.run(fn, inputs, config)
    return layout.run(lower.run(decompose.run(artifact.graphs[0], config), config), config)


def _finish(laid_out, config):
    return runtime.run(backend.run(sdsc.run(kernel.run(laid_out, config), config), config),
                       config)


def test_a_wrong_stride_map_changes_the_runtime_output():
    config = Config()
    x = torch.randn(4, 128)
    laid_out = _stages_to_layout(lambda t: torch.exp(t), (x,), config)
    good = _finish(laid_out, config)([x])[0][0]
    name, layout_in = laid_out.layouts[0]
    wrong = dataclasses.replace(layout_in, stride_map=(64, 1, 128))
    corrupted = laid_out.__class__(laid_out.loop, ((name, wrong),) + laid_out.layouts[1:])
    bad = _finish(corrupted, config)([x])[0][0]
    torch.testing.assert_close(good, torch.exp(x), atol=1e-2, rtol=2e-3)
    assert not torch.allclose(bad, good)


def test_a_dropped_padding_breaks_the_runtime():
    config = Config()
    x = torch.randn(4, 100)
    laid_out = _stages_to_layout(lambda t: torch.exp(t), (x,), config)
    name, layout_in = laid_out.layouts[0]
    dropped = dataclasses.replace(layout_in, device_size=(1,) + layout_in.device_size[1:])
    corrupted = laid_out.__class__(laid_out.loop, ((name, dropped),) + laid_out.layouts[1:])
    with pytest.raises(spyre_sim.SpyreRuntimeError):
        _finish(corrupted, config)([x])


def test_debug_capture_writes_every_stage(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_COMPILE_DEBUG", "1")
    monkeypatch.setenv("SPYRE_SIM_DEBUG_DIR", str(tmp_path))
    compile_workload("mlp", 127, 128)
    (directory,) = tmp_path.iterdir()
    index = json.loads((directory / "stages.json").read_text())
    assert index["version"] == 1
    assert [s["name"] for s in index["stages"]] == list(spyre_sim.STAGES)
    for number, stage in enumerate(index["stages"], start=1):
        assert stage["file"].startswith(f"{number}-{stage['name']}.")
        assert (directory / stage["file"]).read_text()
    assert (directory / "7-backend.cbor").stat().st_size > 0
    assert "decision fusion#0" in (directory / "compile.log").read_text()


def test_an_older_program_survives_a_newer_compile():
    first, _, inputs = compile_workload("mlp", 127, 128)
    before = first.run(*inputs)
    compile_workload("softmax", 127, 128)  # resets Dynamo's caches
    after = first.run(*inputs)
    assert len(first.graphs) == 1
    assert [k.name for k in after.kernels] == [k.name for k in before.kernels]
    assert torch.equal(after.outputs[0], before.outputs[0])
