"""torch-spyre's device program read and timed (backends/torch_spyre_sdsc.py, the reader, and
backends/torch_spyre_timing.py, its price on spyre_sim's timing model), on what torch-spyre's
front half wrote for two small programs (tests/fixtures/torch_spyre_sdsc/, its README says how
they were made). The last test compiles with torch-spyre itself (its history:
SPYRE_REGRESS_TORCH_SPYRE_BUNDLE; it skips with a message without it)."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_companion

from backends import interface
from spyre_sim.cost import host_op_time_us, kernel_cost, transfer_time_us
from spyre_sim.device import DeviceParams

BACKENDS = Path(interface.__file__).parent
FIXTURES = Path(__file__).parent / "fixtures" / "torch_spyre_sdsc"
MATMUL = FIXTURES / "matmul_transpose_sin"
NORMS = FIXTURES / "layernorm_softmax"
FIRST_KERNEL = "sdsc_fused_clone_gelu_mm_t_0"
CPU_OPS = {"aten.sin.default"}  # torch-spyre's fallback_ops, as far as the fixtures need


sdsc = load_companion("torch_spyre_sdsc")
timing = load_companion("torch_spyre_timing")


def program(root: Path, fallbacks=CPU_OPS):
    """A fixture's device program, read as a compile's collector reads it."""
    kernels = {d.name: sdsc.read_bundle(d, d.name) for d in sorted(root.iterdir()) if d.is_dir()}
    return sdsc.DeviceProgram(sdsc.read_wrapper((root / "output_code.py.txt").read_text(),
                                                fallbacks), kernels)


def sdsc_document(kernel_dir: Path, index: int) -> dict:
    return json.loads((kernel_dir / f"sdsc_{index}.json").read_text())


def test_an_sdsc_is_read_as_its_op_cores_iteration_space_splits_and_tensors():
    op = sdsc.read_sdsc(sdsc_document(MATMUL / FIRST_KERNEL, 0), "sdsc_0.json")
    assert (op.op, op.unit, op.cores) == ("batchmatmul", "pt", 2)
    assert dict(op.dims) == {"mb": 64, "out": 128, "in": 128}
    assert dict(op.splits) == {"mb": 2, "out": 1, "in": 1}
    roles = {t.role: t for t in op.tensors}
    # x [64, 128] and w [128, 128] from DRAM, the product kept in LX for the GELU
    assert (roles["INPUT"].memory, dict(roles["INPUT"].extents)) == ("hbm", {"mb": 64, "in": 128})
    assert (roles["KERNEL"].nbytes, roles["KERNEL"].output) == (128 * 128 * 2, False)
    assert (roles["OUTPUT"].memory, roles["OUTPUT"].output) == ("lx", True)
    # a reduction over the stick dim keeps one 64-element stick per row (exx2's mean and var)
    exx2 = sdsc.read_sdsc(sdsc_document(NORMS / "sdsc_fused__softmax_layer_norm_0", 1), "x")
    (out,) = [t for t in exx2.tensors if t.output]
    assert dict(out.extents) == {"mb": 64, "out": 64}


def test_a_document_without_what_the_reader_needs_is_unmodelled_with_the_reason():
    document = sdsc_document(MATMUL / FIRST_KERNEL, 0)
    del document["0_batchmatmul"]["numCoresUsed_"]
    with pytest.raises(sdsc.Unmodelled, match=r"0_batchmatmul.*KeyError.*numCoresUsed_"):
        sdsc.read_sdsc(document, "sdsc_0.json")


def test_bundle_mlir_orders_the_sdscs_and_multiplies_them_by_their_loops_trips():
    mlir = """
        %loop_bound_0 = arith.constant 4 : index
        %loop_bound_1 = arith.constant 3 : index
        sdscbundle.sdsc_execute () {sdsc_filename="sdsc_2.json", "symbol_ids"=[]}
        scf.for %i_0 = %c0 to %loop_bound_0 step %c1 {
            sdscbundle.sdsc_execute (%a) {sdsc_filename="sdsc_0.json", "symbol_ids"=[-1]}
            scf.for %i_1 = %c0 to %loop_bound_1 step %c1 {
                sdscbundle.sdsc_execute () {sdsc_filename="sdsc_1.json", "symbol_ids"=[]}
            }
        }
        sdscbundle.sdsc_execute () {sdsc_filename="sdsc_3.json", "symbol_ids"=[]}
    """
    assert sdsc.execution_order(mlir) == [("sdsc_2.json", 1), ("sdsc_0.json", 4),
                                          ("sdsc_1.json", 12), ("sdsc_3.json", 1)]
    executed = sdsc.read_bundle(MATMUL / FIRST_KERNEL, FIRST_KERNEL)
    assert [e.key for e in executed] == ["0_batchmatmul", "1_gelufwd", "2_shuffle",
                                         "3_ReStickifyOpHBM"]


def test_the_wrapper_gives_the_launches_and_the_cpu_fallback_in_order():
    steps = sdsc.read_wrapper((MATMUL / "output_code.py.txt").read_text(), CPU_OPS)
    assert [type(s).__name__ for s in steps] == ["Launch", "HostCall", "Launch"]
    first, fallback, second = steps
    assert (first.kernel, second.kernel) == (FIRST_KERNEL, "sdsc_fused_add_1")
    # sin of the transposed [128, 64] fp16 result: 128 rows of one 128-byte stick each way
    assert (fallback.op, fallback.on_cpu) == ("aten.sin.default", True)
    assert (fallback.input_bytes, fallback.output_bytes, fallback.elements) == (
        (128 * 128,), 128 * 128, 128 * 64)
    # the same call, when torch-spyre does not list the op as a CPU fallback, runs on the device
    (eager,) = [s for s in sdsc.read_wrapper((MATMUL / "output_code.py.txt").read_text())
                if isinstance(s, sdsc.HostCall)]
    assert not eager.on_cpu


def test_a_matmul_becomes_the_cost_models_kernel_with_m_n_k_named_by_its_operands():
    classes = timing.vector_classes(_ops())
    (matmul, *_) = sdsc.read_bundle(MATMUL / FIRST_KERNEL, FIRST_KERNEL)
    work = timing.kernel_work(matmul, _cost(), classes)
    assert (work.kind, dict(work.dims)) == ("matmul", {"b": 1, "m": 64, "n": 128, "k": 128})
    assert (dict(work.splits), work.cores_used, work.macs) == (
        {"b": 1, "m": 2, "n": 1, "k": 1}, 2, 64 * 128 * 128)
    assert (work.hbm_read_bytes, work.hbm_write_bytes) == (64 * 128 * 2 + 128 * 128 * 2, 0)
    # a batched matmul whose rows are not the SDSC's `mb`: the operands say which is which
    batched = sdsc.SdscOp(file="sdsc_7.json", op="batchmatmul", unit="pt", cores=32,
                          dims=(("x", 4), ("mb", 128), ("out", 128), ("in", 64)),
                          splits=(("x", 2), ("mb", 8), ("out", 2), ("in", 1)), tensors=(
                              _tensor("INPUT", ("x", 4), ("mb", 128), ("in", 64)),
                              _tensor("KERNEL", ("x", 4), ("out", 128), ("in", 64)),
                              _tensor("OUTPUT", ("x", 4), ("out", 128), ("mb", 128))))
    assert timing.matmul_dims(batched) == (("b", ("x",)), ("m", ("mb",)), ("n", ("out",)),
                                           ("k", ("in",)))


def test_vector_ops_are_reductions_when_their_output_is_smaller_and_passes_per_operand():
    classes = timing.vector_classes(_ops())
    norms = {e.key: e for e in sdsc.read_bundle(NORMS / "sdsc_fused__softmax_layer_norm_0",
                                                 "k")}
    work = {key: timing.kernel_work(e, _cost(), classes) for key, e in norms.items()}
    volume = 64 * 128
    assert (work["4_max"].kind, work["4_max"].reduce_elems) == ("reduction", volume)
    assert (work["6_exp"].kind, work["6_exp"].transcendental_elems) == ("pointwise", volume)
    # exx2 squares and sums x and x^2; layernormnorm applies mean, scale, weight and bias
    assert (work["1_exx2"].reduce_elems, work["1_exx2"].simple_elems) == (2 * volume, volume)
    assert work["3_layernormnorm"].simple_elems == 4 * volume
    assert work["5_sub"].simple_elems == volume  # two operands: one pass
    restickify = timing.kernel_work(sdsc.read_bundle(MATMUL / FIRST_KERNEL, "k")[3], _cost(),
                                    classes)
    assert (restickify.kind, restickify.hbm_write_bytes) == ("restickify", 128 * 64 * 2)
    assert kernel_cost(restickify, DeviceParams()).relayout_us > 0


def test_the_device_time_is_launch_gaps_kernels_and_the_fallbacks_copies_and_host_op():
    device = DeviceParams()
    priced = timing.price(program(MATMUL), device)
    assert priced.unmodelled == () and len(priced.kernels) == 5
    assert all(k.time_us > 0 and k.cores == 2 for k in priced.kernels)
    fallback = (2 * transfer_time_us(128 * 128, device) + host_op_time_us(128 * 64, device))
    expected = 2 * device.launch_us + sum(k.time_us for k in priced.kernels) + fallback
    assert priced.device_us == pytest.approx(expected)
    assert priced == timing.price(program(MATMUL), device)  # deterministic
    events = [e for e in priced.trace["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in events} == {"launch", "kernel", "d2h", "h2d", "fallback"}
    assert priced.trace["otherData"]["reader_version"] == sdsc.READER_VERSION


def test_an_op_the_reader_cannot_describe_is_a_named_row_with_no_time(tmp_path):
    root = shutil.copytree(MATMUL, tmp_path / "p")
    path = root / FIRST_KERNEL / "sdsc_1.json"
    document = json.loads(path.read_text())
    document["1_gelufwd"]["dscs_"][0]["gelufwd"]["computeOp_"][0]["opFuncName"] = "conv7d"
    path.write_text(json.dumps(document))
    known = timing.price(program(MATMUL))
    priced = timing.price(program(root))
    (row,) = [k for k in priced.kernels if not k.modelled]
    assert row.name.startswith("unmodelled kernel: conv7d (an op neither")
    assert math.isnan(row.time_us) and row.bound == "unmodelled"
    assert priced.unmodelled == (row.name,)
    gelu = next(k for k in known.kernels if k.op == "gelufwd")
    assert priced.device_us == pytest.approx(known.device_us - gelu.time_us)
    (root / FIRST_KERNEL / "sdsc_2.json").write_text("{not json")
    broken = [k.name for k in timing.price(program(root)).kernels if not k.modelled]
    assert broken[1].startswith("unmodelled kernel: sdsc_2.json (unreadable JSON: ")
    # an op run eagerly on the device (no SDSC) and a kernel torch-spyre could not implement
    eager = timing.price(program(MATMUL, fallbacks=()))
    assert [k.name for k in eager.kernels if not k.modelled] == [
        "unmodelled kernel: aten.sin.default (run eagerly on the device: no SDSC in the "
        "compile)"]
    unimplemented = dataclasses.replace(program(MATMUL), steps=(
        sdsc.Launch("sdsc_missing_0", unimplemented="fancy_op"),))
    (row,) = timing.price(unimplemented).kernels
    assert row.name == ("unmodelled kernel: fancy_op (torch-spyre compiles it to a runtime "
                        "exception)")


def test_fewer_cores_for_a_matmul_and_an_added_restickify_cost_modelled_time(tmp_path):
    """The two regressions the model is for, in miniature: a work division that leaves cores
    idle, and a layout that restickifies once more."""
    base = timing.price(program(MATMUL)).device_us
    one_core = shutil.copytree(MATMUL, tmp_path / "one_core")
    path = one_core / FIRST_KERNEL / "sdsc_0.json"
    document = json.loads(path.read_text())
    document["0_batchmatmul"]["numCoresUsed_"] = 1
    document["0_batchmatmul"]["numWkSlicesPerDim_"]["mb"] = 1
    path.write_text(json.dumps(document))
    assert timing.price(program(one_core)).device_us > base
    twice = shutil.copytree(MATMUL, tmp_path / "twice")
    mlir = twice / FIRST_KERNEL / "bundle.mlir"
    line = next(x for x in mlir.read_text().splitlines() if "sdsc_3.json" in x)
    mlir.write_text(mlir.read_text().replace(line, f"{line}\n{line}"))
    restickify = next(k for k in timing.price(program(MATMUL)).kernels if k.op ==
                      "ReStickifyOpHBM")
    assert timing.price(program(twice)).device_us == pytest.approx(base + restickify.time_us)


def _tensor(role: str, *extents: tuple[str, int]):
    return sdsc.Tensor(role, "hbm", 2, tuple(extents), output=role == "OUTPUT")


def _cost():
    from spyre_sim import cost

    return cost


def _ops():
    from spyre_sim import ops

    return ops


COMPILE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("torch_spyre_backend", sys.argv[1])
backend = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = backend
spec.loader.exec_module(backend)
spec = importlib.util.spec_from_file_location("workloads", sys.argv[2])
workloads = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = workloads
spec.loader.exec_module(workloads)
found = {}
for name, values in (("default", None), ("sencores", {"sencores": 8})):
    run = backend.compile(*workloads.build("mlp", 128), values).run()
    found[name] = {"device_us": run.device_us, "unmodelled": run.unmodelled,
                   "kernels": [[k.name, k.time_us, k.cores] for k in run.kernels],
                   "trace_events": len(run.trace["traceEvents"])}
print(json.dumps(found))
"""


@pytest.mark.slow
def test_a_compile_of_the_histories_head_is_timed_kernel_by_kernel(torch_spyre_checkout):
    """torch-spyre's own compile of the suite's MLP: every kernel modelled, on 32 cores, and
    its `sencores` knob at 8 takes more modelled time."""
    catalogue = Path(interface.__file__).parents[1] / "suites" / "torch_spyre" / \
        "benchmarks" / "workloads.py"
    done = subprocess.run([sys.executable, "-c", COMPILE, str(BACKENDS / "torch_spyre.py"),
                           str(catalogue)], capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(torch_spyre_checkout), "PATH": "/usr/bin:/bin",
                               "OMP_NUM_THREADS": "1", "HOME": str(torch_spyre_checkout.parent)})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    default, fewer = found["default"], found["sencores"]
    assert default["unmodelled"] == 0 and default["trace_events"] > 0
    assert [op.split("/")[-1] for op, _, _ in default["kernels"]] == [
        "0_batchmatmul", "1_shuffle", "2_gelufwd", "3_batchmatmul"]
    assert all(time > 0 and cores == 32 for _, time, cores in default["kernels"])
    assert default["device_us"] > DeviceParams().launch_us
    assert fewer["device_us"] > default["device_us"]
    assert {cores for _, _, cores in fewer["kernels"]} == {8}
