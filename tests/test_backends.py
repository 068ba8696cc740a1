"""The backend interface (`backends.interface`): both compilers under test answer it alike on
one workload of the catalogue, loaded by file path as a probe loads them."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest

from backends import interface
from benchmarks import workloads
from regressions import codec
from regressions.bisection import minimize
from regressions.errors import SpyreRegressError
from regressions.probing import probe, suite
from regressions.probing.protocol import (
    PROBE_ANSWER_VERSION,
    ProbeRequest,
    StageAnswer,
    TimingAnswer,
)
from regressions.records.captures import load_capture, single_capture


def _load(name: str):
    """The backend module by path under a name of its own, as a probe loads it."""
    path = interface.module_path(name)
    spec = importlib.util.spec_from_file_location(f"backend_under_test_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# (backend, largest relative error of the compiled output against float64): DLFloat16 keeps
# 7 fraction bits, Inductor's CPU code computes in float32.
BACKENDS = [pytest.param("spyre_sim", 0.05, id="spyre_sim"),
            pytest.param("inductor", 1e-4, id="inductor", marks=pytest.mark.slow)]


def test_an_unknown_backend_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown backend 'tvm'; known: inductor, spyre_sim"):
        interface.module_path("tvm")
    with pytest.raises(ValueError, match="unknown backend 'tvm'"):
        interface.wording("tvm")


def test_every_backend_has_report_wording_and_a_knob_reads_as_its_users_write_it():
    assert set(interface.WORDING) == set(interface.MODULES)
    assert interface.wording("spyre_sim").knob_setting("fusion", True) == "Config(fusion=True)"
    assert interface.wording("inductor").knob_setting("cpp.simdlen", None) == \
        "torch._inductor.config.cpp.simdlen = None"


@pytest.fixture(scope="module")
def mlp():
    return workloads.build("mlp", 8, 32)


@pytest.mark.parametrize(("name", "tolerance"), BACKENDS)
def test_a_backend_compiles_runs_and_captures_the_catalogues_mlp(name, tolerance, mlp, tmp_path,
                                                                monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a user runs it: a capture leaves nothing here
    backend = _load(name)
    program, inputs = mlp
    assert backend.NAME == name and len(backend.STAGES) == len(set(backend.STAGES)) >= 6
    knobs = backend.knobs()
    assert knobs and all(k.stage in backend.STAGES and k.default in k.choices
                         and len(k.choices) >= 2 for k in knobs)

    compiled = backend.compile(program, inputs)
    assert set(backend.STAGES) <= set(compiled.compile_s)
    assert all(s >= 0 for s in compiled.compile_s.values())
    assert sum(compiled.compile_s[s] for s in backend.STAGES) > 0
    run = compiled.run(*inputs)
    assert run.host_s > 0
    assert (run.device_us is not None and run.device_us > 0) == backend.DEVICE_CLOCK
    (reference,) = backend.reference(program, inputs)
    assert reference.shape == run.outputs[0].shape and reference.is_floating_point()
    reference = reference.double()
    error = (run.outputs[0].double() - reference).abs().max().item()
    assert error <= tolerance * reference.abs().max().item()
    assert math.isfinite(error)

    candidate = minimize.from_graph(*backend.graph(program, inputs))  # the minimizer's start
    assert candidate.op_count >= 3  # two matmuls and the GELU, at least

    directory = backend.capture(program, inputs, None, tmp_path / "capture")
    capture = load_capture(directory)
    assert capture.stages == tuple(backend.STAGES)
    assert all(capture.texts[s] for s in backend.STAGES)
    assert set(backend.environment()) >= {"torch"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capture"]


@pytest.mark.parametrize(("name", "workload", "knob", "value"), [
    # the MLP's bias and GELU fuse into the matmul's kernel; Inductor fuses the layer norm's
    # reductions and pointwise ops into one scheduler node
    pytest.param("spyre_sim", "mlp", "fusion", False, id="spyre_sim"),
    pytest.param("inductor", "layernorm", "max_fusion_size", 1, id="inductor",
                 marks=pytest.mark.slow)])
def test_a_knob_changes_the_capture_first_at_its_own_stage(name, workload, knob, value,
                                                           tmp_path):
    backend = _load(name)
    program, inputs = workloads.build(workload, 8, 32)
    stage = next(k.stage for k in backend.knobs() if k.name == knob)
    default = load_capture(backend.capture(program, inputs, None, tmp_path / "default"))
    changed = load_capture(backend.capture(program, inputs, {knob: value}, tmp_path / "knob"))
    differs = [s for s in backend.STAGES if default.texts[s] != changed.texts[s]]
    assert differs and differs[0] == stage, (knob, differs)


def _request(backend: str, metric: str, **fields) -> ProbeRequest:
    """A probe request for the catalogue's small MLP, as `probe_request` writes one."""
    return ProbeRequest(backend=str(interface.module_path(backend)),
                        harness=str(suite.harness_path()), workloads=workloads.__file__,
                        workload="mlp", seq=8, width=32, metric=metric, **fields)


def test_the_probe_samples_through_the_backend_a_request_names():
    answer = probe.cmd_sample(_request("spyre_sim", "device_time", samples=3))
    assert answer.status == "ok" and len(answer.samples) == 3
    assert all(0 < s < 1 for s in answer.samples)  # seconds of the simulated device
    knobs = probe.cmd_knobs(_request("spyre_sim", "device_time", part=(0, 4)))
    spyre_knobs = [k.name for k in _load("spyre_sim").knobs()]
    # of this probe's share (cse, prepack_weights), the MLP has no common subexpression
    assert spyre_knobs[::4] == ["cse", "prepack_weights"]
    assert {t.knob for t in knobs.trials} == {"prepack_weights"}


def test_the_knob_probe_tries_only_the_knobs_the_compile_consults():
    """A knob spyre_sim never asks about in this program cannot change its compile: no
    trial, which on a clock could only measure the machine's load."""
    tried = {name: {t.knob for t in probe.cmd_knobs(
        dataclasses.replace(_request("spyre_sim", "device_time"), workload=name)).trials}
        for name in ("mlp", "layernorm")}
    assert "layernorm_decomposition" in tried["layernorm"]
    assert not {"layernorm_decomposition", "softmax_decomposition", "cse"} & tried["mlp"]
    assert {"fusion", "work_division", "matmul_accumulation"} <= tried["mlp"]


def test_the_probe_reads_the_part_of_a_stage_s_wait_that_a_request_names(monkeypatch):
    """A stage that sleeps 100 ms: its blocked time says so; another stage's does not. (Beside
    a busy neighbour a 30 ms sleep read 22 ms: CPU the process's other threads spend while the
    stage sleeps is subtracted from its wall time too, docs/explanation/compile-parts.md.)"""
    import time

    import spyre_sim

    run_stage = spyre_sim.run_stage

    def sleepy(stage, *args, **kwargs):
        if stage == "sdsc":
            time.sleep(0.1)
        return run_stage(stage, *args, **kwargs)

    monkeypatch.setattr(spyre_sim, "run_stage", sleepy)
    blocked = probe.cmd_sample(_request("spyre_sim", "compile_time", samples=2, stage="sdsc",
                                        wait_part="blocked"))
    assert all(0.06 < s < 0.3 for s in blocked.samples), blocked.samples
    other = probe.cmd_sample(_request("spyre_sim", "compile_time", samples=2, stage="kernel",
                                      wait_part="blocked"))
    assert all(s < 0.01 for s in other.samples), other.samples  # another stage: no wait


def _clock(value_of) -> probe.Clock:
    """A clock metric each of whose batches of readings is `value_of(backend, request,
    program, inputs, values)`, `count` times over; a figure is the median of 5."""
    return probe.Clock(lambda backend, request, program, inputs, values, count:
                       [value_of(backend, request, program, inputs, values=values)] * count,
                       lambda request: 5)


def test_a_clocks_trial_far_from_restoring_is_read_no_further(monkeypatch):
    """Told the level below which a knob value restores the metric, the probe reads a
    clock's trial twice first: one that reads twice that level or more is left there, and
    not confirmed; the one that could restore it is read in full and confirmed."""
    from regressions.bisection import knobs as knob_search

    readings: list[tuple[dict, int]] = []

    def reading(backend, request, program, inputs, values, count):
        readings.append((values, count))
        restores = values.get("prepack_weights") is False
        defaults = not set(values) - set(probe._backend(request).QUIET)
        return [10.0 if restores else 30.0 if defaults else 31.0] * count

    monkeypatch.setitem(probe.METRIC, "compile_time",
                        probe.Clock(reading, lambda request: 5))
    regression = knob_search.Regression(good=10.0, bad=30.0)
    answer = probe.cmd_knobs(_request("spyre_sim", "compile_time",
                                      restoring_share=regression.restoring_share))
    by_knob = {(t.knob, t.value): t.metric for t in answer.trials}
    assert by_knob.pop(("prepack_weights", False)) == 10.0 and len(by_knob) >= 3
    assert set(by_knob.values()) == {31.0}
    restoring = knob_search.restoring(answer, regression)
    assert restoring is not None and restoring.trial.knob == "prepack_weights"
    expected = [(False, 5)]  # the defaults, then each trial: two readings, five if restoring
    for trial in answer.trials:
        restores = (trial.knob, trial.value) == ("prepack_weights", False)
        expected += [(restores, 2)] + ([(True, 3)] if restores else [])
    expected += [(False, 5), (True, 5)] * probe.CONFIRMATIONS  # only the restoring trial's
    assert [(values.get("prepack_weights") is False, n) for values, n in readings] == expected
    assert answer.baseline == 30.0

    readings.clear()  # the same probe without the level: every trial read in full
    answer = probe.cmd_knobs(_request("spyre_sim", "compile_time"))
    assert [n for _, n in readings[:1 + len(answer.trials)]] == [5] * (1 + len(answer.trials))


def test_a_clocks_best_knob_is_measured_again_beside_the_defaults(monkeypatch):
    """The machine grows quieter while the knob probe runs: the defaults, measured first,
    read 30, every trial after them 15. Measured again side by side, the best trial is no
    faster than the defaults; on the device clock nothing is measured twice."""
    from regressions.bisection import knobs as knob_search

    calls: list[dict] = []

    def quieter(backend, request, program, inputs, values):
        calls.append(values)
        return 30.0 if len(calls) == 1 else 15.0 + 0.1 * len(values)

    monkeypatch.setitem(probe.METRIC, "compile_time", _clock(quieter))
    answer = probe.cmd_knobs(_request("spyre_sim", "compile_time", part=(0, 4)))
    assert answer.baseline == pytest.approx(15.0 + 0.1 * len(calls[0]))
    best = min(answer.trials, key=lambda t: t.metric)
    assert best.metric > answer.baseline  # the trial sets one knob more than the defaults
    assert knob_search.restoring(answer, knob_search.Regression(good=10.0, bad=30.0)) is None
    confirmations = len(calls) - 1 - len(answer.trials)
    assert confirmations in [2 * probe.CONFIRMATIONS * n for n in
                             range(1, probe.CONFIRMED_TRIALS + 1)]

    calls.clear()
    monkeypatch.setitem(probe.METRIC, "device_time", quieter)
    answer = probe.cmd_knobs(_request("spyre_sim", "device_time", part=(0, 4)))
    assert answer.baseline == 30.0 and len(calls) == 1 + len(answer.trials)


def test_a_scoped_knob_probe_measures_the_scope_alone(monkeypatch):
    """The probe that narrows a chosen knob measures it per scope limit and nothing else:
    the search that chose it is not run again; a backend that cannot scope measures nothing."""
    from regressions.probing.protocol import KnobScope

    calls: list[dict] = []

    def counted(backend, request, program, inputs, values):
        calls.append(values)
        return 10.0

    monkeypatch.setitem(probe.METRIC, "device_time", counted)
    scope = KnobScope("prepack_weights", False, (0, 1, 2))
    answer = probe.cmd_knobs(_request("spyre_sim", "device_time", scope=scope))
    assert answer.trials == () and [entry.limit for entry in answer.scoped] == [0, 1, 2]
    assert [v["knob_scope"] for v in calls] == [[["prepack_weights", n]] for n in (0, 1, 2)]
    assert answer.baseline == answer.scoped[0].metric

    calls.clear()
    answer = probe.cmd_knobs(_request("inductor", "device_time", scope=KnobScope(
        "max_fusion_size", 1, (0, 1))))
    assert (answer.baseline, answer.trials, answer.scoped, calls) == (0.0, (), (), [])


@pytest.mark.slow
def test_the_probe_measures_inductor_on_the_host_clock_and_searches_its_knobs():
    answer = probe.cmd_sample(_request("inductor", "host_time", samples=5))
    assert answer.status == "ok" and answer.deterministic is False
    assert len(answer.samples) == 5 and all(s > 0 for s in answer.samples)
    with pytest.raises(ValueError, match="inductor has no device clock"):
        probe.cmd_sample(_request("inductor", "device_time", samples=1))
    index = [k.name for k in _load("inductor").knobs()].index("max_fusion_size")
    knobs = probe.cmd_knobs(_request("inductor", "compile_time", part=(index, 100),
                                     compile_repeats=1))
    assert knobs.baseline > 0
    assert [(t.knob, t.stage, t.value) for t in knobs.trials] == [
        ("max_fusion_size", "fusion", 1)]


@pytest.mark.parametrize("name", [pytest.param("spyre_sim", id="spyre_sim"),
                                  pytest.param("inductor", id="inductor",
                                               marks=pytest.mark.slow)])
def test_the_stage_probe_captures_and_times_through_the_backend(name, tmp_path):
    backend = _load(name)
    stages = probe.cmd_stages(_request(name, "compile_time", compile_repeats=2,
                                       capture_dir=str(tmp_path / "capture"),
                                       trace=str(tmp_path / "trace.json"),
                                       wait_part="blocked"))
    assert isinstance(stages, StageAnswer)
    assert stages.stages == backend.STAGES and len(stages.compile_times) == 2
    assert all(set(times) == set(backend.STAGES) for times in stages.compile_times)
    # for an alert on a part of the wall time: each compile's parts, per region of the
    # backend's compile and in total
    assert len(stages.compile_waits) == 2
    for regions in stages.compile_waits:
        assert set(regions) == {*backend.WORK_REGIONS, "total"}
        assert all(set(parts) == {"wall", "cpu", "children_cpu", "run_queue", "blocked"}
                   for parts in regions.values())
        # both clocks ran; the CPU can exceed the wall time where the compiler's threads work
        # side by side (an Inductor compile read 0.221 s of CPU in 0.210 s beside a neighbour)
        assert regions["total"]["wall"] > 0 and regions["total"]["cpu"] > 0
        assert regions["total"]["blocked"] == pytest.approx(max(
            0.0, regions["total"]["wall"] - regions["total"]["cpu"]
            - regions["total"]["children_cpu"] - regions["total"]["run_queue"]))
    assert load_capture(single_capture(tmp_path / "capture")).stages == backend.STAGES
    # a device model gives device time, kernels, a trace and per-stage errors; a CPU does not
    modelled = backend.DEVICE_CLOCK
    assert (stages.device_time_us is not None, bool(stages.kernels),
            (tmp_path / "trace.json").is_file(), bool(stages.stage_errors)) == (modelled,) * 4
    assert stages.host_s is None  # measured only when the request asks for the host clock
    timed = probe.cmd_stages(_request(
        name, "host_time", compile_repeats=1, capture_dir=str(tmp_path / "again"),
        host_clock=True, calls=3))
    assert timed.host_s is not None and 0 < timed.host_s < 1  # s per warm call of the MLP


@pytest.mark.parametrize("name", [pytest.param("spyre_sim", id="spyre_sim"),
                                  pytest.param("inductor", id="inductor",
                                               marks=pytest.mark.slow)])
def test_the_timing_probe_times_iterations_through_the_backend(name):
    """The report's timing: host time always, device time where there is a device clock,
    the warm-up call's errors, and the configuration the backend applied."""
    backend = _load(name)
    answer = probe.cmd_timing(
        _request(name, "device_time", iterations=4, config=dict(backend.INDEPENDENT)))
    assert isinstance(answer, TimingAnswer)
    assert answer.status == "ok" and len(answer.host_s) == 4 and min(answer.host_s) > 0
    assert len(answer.device_us) == (4 if backend.DEVICE_CLOCK else 0)
    assert bool(answer.kernels) == backend.DEVICE_CLOCK  # a device model names its kernels
    max_rel = (answer.errors or {}).get("max_rel")
    assert max_rel is not None and 0 <= max_rel < 0.05 and answer.nonfinite is None
    assert set(answer.compile_times) == set(backend.STAGES) and answer.width == 32
    assert answer.environment["torch"] == backend.environment()["torch"]
    assert json.dumps(answer.config, sort_keys=True) == json.dumps(
        backend.settings(backend.INDEPENDENT), sort_keys=True)  # as the bundle writes both
    if name == "spyre_sim":  # the whole Config, as the report's environment table reads it
        assert answer.config["cores"] == 32 and all(k.cores for k in answer.kernels)
    else:  # every knob the search may switch, at this torch's default
        assert {k.name for k in backend.knobs()} <= set(answer.config)


def test_a_repository_names_its_backend_in_its_catalogue(tmp_path):
    catalogue = tmp_path / "benchmarks" / "workloads.py"
    catalogue.parent.mkdir()
    catalogue.write_text("def build(name, seq, width=None):\n    pass\n")
    assert suite.backend_name(tmp_path) == "spyre_sim"  # a catalogue that names none
    catalogue.write_text('BACKEND = "inductor"\n')
    assert suite.backend_name(tmp_path) == "inductor"
    catalogue.write_text('BACKEND = "tvm"\n')
    with pytest.raises(SpyreRegressError, match="names BACKEND = 'tvm'; this spyre-regress "
                                                 "measures inductor, spyre_sim"):
        suite.backend_name(tmp_path)
    assert suite.backend_name(interface.module_path("spyre_sim").parents[1]) == "spyre_sim"


def test_a_request_that_names_no_backend_measures_spyre_sim():
    """A request written before backends existed (a nightly still running the old code
    while the probe file changed under it) measures spyre_sim, as it always did."""
    written = codec.to_json(_request("spyre_sim", "device_time", samples=2))
    del written["backend"]
    request = codec.from_json(ProbeRequest, written)  # as the probe child reads it
    assert probe.DEFAULT_BACKEND == interface.module_path("spyre_sim")
    answer = probe.cmd_sample(request)
    assert answer.status == "ok" and len(answer.samples) == 2


def test_a_commit_whose_compiler_does_not_import_is_untestable(tmp_path):
    """The probe script as a subprocess runs it, with a checkout whose spyre_sim is broken."""
    (tmp_path / "spyre_sim").mkdir()
    (tmp_path / "spyre_sim" / "__init__.py").write_text("raise ImportError('half a rename')\n")
    request = tmp_path / "request.json"
    request.write_text(json.dumps(codec.to_json(_request("spyre_sim", "device_time",
                                                         samples=1))))
    answer = tmp_path / "answer.json"
    done = subprocess.run([sys.executable, "-P", probe.__file__, "sample", str(request),
                           str(answer)], env={**os.environ, "PYTHONPATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(answer.read_text())
    assert outcome["status"] == "untestable" and outcome["version"] == PROBE_ANSWER_VERSION
    assert "does not import (spyre.py): half a rename" in outcome["detail"]


def test_an_inductor_based_projects_module_takes_compile_fxs_place(tmp_path, monkeypatch):
    """`COMPILER` names the project's module: its CONFIG becomes the knobs' defaults and the
    recorded settings, its compile_graph is what compiles a Dynamo graph, and a setting this
    torch's config lacks (spyre_sim's `numerics`) is dropped, not patched."""
    (tmp_path / "my_backend.py").write_text(
        "CONFIG = {'cpp.simdlen': 1}\n\n\ndef compile_graph(graph_module, example_inputs):\n"
        "    return graph_module.forward\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    backend = _load("inductor")
    assert backend.graph_compiler().__name__ == "compile_fx"  # Inductor itself by default
    backend.COMPILER = "my_backend"
    assert backend.graph_compiler().__module__ == "my_backend"
    assert {k.name: k.default for k in backend.knobs()}["cpp.simdlen"] == 1
    recorded = backend.settings({"max_fusion_size": 1, "numerics": True})
    assert recorded["cpp.simdlen"] == 1 and recorded["max_fusion_size"] == 1
    assert "numerics" not in recorded
    assert backend.known_settings({"numerics": True, "freezing": True}) == (
        {"freezing": True}, ["numerics"])
    assert backend.environment()["compiler"] == "my_backend unknown"
    assert backend.build_path() == str(tmp_path)


def test_the_catalogue_names_the_projects_compiler_as_a_module(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    catalogue = tmp_path / "benchmarks" / "workloads.py"
    catalogue.write_text('BACKEND = "inductor"\nCOMPILER = "my_backend.compiler"\n')
    assert suite.compiler_name(tmp_path) == "my_backend.compiler"
    catalogue.write_text('BACKEND = "inductor"\n')
    assert suite.compiler_name(tmp_path) is None
    catalogue.write_text('COMPILER = "os; rm -rf /"\n')
    with pytest.raises(SpyreRegressError, match="must be a dotted module name"):
        suite.compiler_name(tmp_path)
