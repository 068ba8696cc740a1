"""scripts/torch_spyre_device.py's tables: the summary of both compilers' programs, each
kernel launch's modelled time, and a card's figures beside the model's (the script's own
measuring runs torch-spyre and is run by hand; docs/measurements/torch-spyre.md)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from conftest import load_companion

from backends import interface
from spyre_sim.device import DeviceParams

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import torch_spyre_device as script  # noqa: E402


def _document() -> dict:
    kernels = [
        {"name": "k0/0_batchmatmul", "op": "batchmatmul", "cores": 32, "bytes": 100,
         "splits": [["b", 1], ["m", 4], ["n", 8], ["k", 1]], "time_us": 4.0, "bound": "memory",
         "repeats": 1, "reason": None},
        {"name": "k0/1_gelufwd", "op": "gelufwd", "cores": 32, "bytes": 0,
         "splits": [["mb", 32]], "time_us": 2.0, "bound": "compute", "repeats": 1,
         "reason": None},
        {"name": "unmodelled kernel: conv7d (x)", "op": "conv7d", "cores": 0, "bytes": 0,
         "splits": [], "time_us": None, "bound": "unmodelled", "repeats": 1,
         "reason": "k1/0_conv7d: x"}]
    return {"version": 1, "commit": "abc", "spyre_sim": {"mlp-128": {"device_us": 50.0,
            "kernels": [{"name": "k0_mm_gelu", "cores": 32, "splits": [["m", 2], ["n", 16]],
                         "bytes": 9, "time_us": 7.5, "bound": "memory"}]}},
            "torch_spyre": [{"workload": "mlp", "seq": 128, "values": {}, "device_us": 46.0,
                             "kernels": kernels, "unmodelled": 1,
                             "own_model": {"total_us": 13.0, "groups": []}},
                            {"workload": "mlp", "seq": 128, "values": {"sencores": 8},
                             "knob": "sencores", "device_us": 69.0, "kernels": kernels,
                             "unmodelled": 1}]}


def test_the_summary_kernels_and_knobs_render_from_the_document():
    text = script.render(_document())
    assert "| mlp | 128 | 3 | 1 | 46.00 | 6.00 | 13.00 | 1 | 50.00 | 0.92 |" in text
    assert "| torch-spyre | k0/0_batchmatmul | 32 | m4 n8 | 100 | 4.00 | memory |" in text
    assert "| torch-spyre | unmodelled kernel: conv7d (x) | 0 | - | 0 | unmodelled |" in text
    assert "| spyre_sim | k0_mm_gelu | 32 | m2 n16 | 9 | 7.50 | memory |" in text
    assert "| sencores | 8 | mlp | 128 | 46.00 | 69.00 | 1.500 |" in text


def test_a_cards_figures_sit_beside_the_model_per_kernel_launch_and_per_call():
    document = _document()
    assert script.kernel_launches(document["torch_spyre"][0]) == {
        "k0": 6.0, "k1": None}
    measured = {"version": 1, "commit": "abc", "points": {
        "mlp-128": {"device_us": 40.0, "kernels": {"k0": 5.0}}}}
    lines = script.measured_lines(document, measured)
    assert "| mlp | 128 | k0 | 6.00 | 5.00 | +20.0% |" in lines
    assert "| mlp | 128 | per call | 46.00 | 40.00 | +15.0% |" in lines
    with pytest.raises(SystemExit, match="version 2; this script reads version 1"):
        script.measured_lines(document, {**measured, "version": 2})


FIXTURES = Path(__file__).parent / "fixtures" / "torch_spyre_sdsc"


def _fixture_point() -> dict:
    """The committed matmul fixture priced as the script's child records a point: its kernel
    rows, each SDSC execution's fields and the compact timeline."""
    sdsc, timing = load_companion("torch_spyre_sdsc"), load_companion("torch_spyre_timing")
    root = FIXTURES / "matmul_transpose_sin"
    program = sdsc.DeviceProgram(
        sdsc.read_wrapper((root / "output_code.py.txt").read_text(), {"aten.sin.default"}),
        {d.name: sdsc.read_bundle(d, d.name) for d in sorted(root.iterdir()) if d.is_dir()})
    priced = timing.price(program)
    kernels = [{"name": k.name, "op": k.op, "cores": k.cores, "splits": k.splits,
                "bytes": k.bytes, "time_us": k.time_us, "bound": k.bound} for k in priced.kernels]
    fields = {e.name: {**dataclasses.asdict(e.op), "repeats": e.repeats}
              for ex in program.kernels.values() for e in ex if e.op is not None}
    point = {"workload": "matmul_transpose_sin", "seq": 64, "values": {},
             "device_us": priced.device_us, "kernels": kernels, "unmodelled": 0,
             "sdsc": fields, "timeline": script.compact_trace(priced.trace)}
    return json.loads(json.dumps(point))  # as the document holds it


def test_the_device_time_splits_into_launches_kernels_copies_and_fallbacks():
    point = _fixture_point()
    terms = script.time_terms(point["timeline"])
    # two kernel launches (the matmul's bundle and the add's), sin on the CPU between them
    assert (terms["launches"], terms["kernels"]) == (2, 5)
    assert terms["launch_us"] == pytest.approx(2 * DeviceParams().launch_us)
    assert terms["kernel_us"] == pytest.approx(sum(k["time_us"] for k in point["kernels"]))
    assert terms["transfer_us"] > 0 and terms["fallback_us"] > 0
    assert terms["device_us"] == pytest.approx(point["device_us"])
    assert [op for op, _, _ in script.time_by_op(point)] == [
        "gelufwd", "batchmatmul", "ReStickifyOpHBM", "add", "shuffle"]  # largest first


def test_each_sdsc_execution_shows_its_iteration_space_and_where_its_tensors_live():
    point = _fixture_point()
    matmul = point["sdsc"]["sdsc_fused_clone_gelu_mm_t_0/0_batchmatmul"]
    # x [64, 128] and w [128, 128] read from DRAM, the product written to LX for the GELU
    # (the fixtures' SDSC keys are sorted: `N_` in name order)
    assert script.sdsc_cells(matmul) == ("in128 mb64 out128", "in1 mb2 out1, 2 cores",
                                         "r in128 mb64 = 16384, r in128 out128 = 32768",
                                         "w mb64 out128 = 16384")
    parts = script.kernel_parts(point["timeline"])
    assert set(parts["sdsc_fused_clone_gelu_mm_t_0/0_batchmatmul"]) == set(script.PARTS)
    sim = {"device_us": 23.0,
           "kernels": [{"name": "k0", "cores": 32, "splits": [], "bytes": 9, "time_us": 3.0,
                        "bound": "memory"}],
           "timeline": [{"name": "launch k0", "ph": "X", "ts": 0, "dur": 20.0, "pid": 2,
                         "tid": 0, "cat": "launch"},
                        {"name": "k0", "ph": "X", "ts": 20.0, "dur": 3.0, "pid": 1, "tid": 0,
                         "cat": "kernel", "args": {}}],
           "work": {"k0": {"dims": [["m", 64]], "splits": [["m", 2]], "cores_used": 2,
                           "hbm_read_bytes": 5, "hbm_write_bytes": 4}},
           "parts": {"k0": dict.fromkeys(script.PARTS, 1.0)}}
    text = script.render({"version": 1, "commit": "abc", "torch_spyre": [point],
                          "spyre_sim": {"matmul_transpose_sin-64": sim}})
    assert "#### matmul_transpose_sin, seq 64: where the time goes" in text
    assert "first divergent stage" not in text  # no captures: no empty knob table
    assert "| spyre_sim | 1 x 20.00 = 20.00 | 1 | 3.00 | 0.00 | 0.00 | 23.00 |" in text
    assert "| torch-spyre - spyre_sim | +1 launches = +20.00 | +4 |" in text
    assert ("| torch-spyre | 0_batchmatmul | " in text
            and "| in128 mb64 out128 | in1 mb2 out1, 2 cores | r in128 mb64 = 16384, "
                "r in128 out128 = 32768 | w mb64 out128 = 16384 |" in text)
    assert ("| spyre_sim | k0 | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 | 3.00 | 1 | m64 | m2, 2 cores | "
            "r 5, w 4 | - |") in text


def test_spyre_sims_point_carries_its_timeline_work_and_cost_terms():
    workloads = interface.load_file("workloads_catalogue", script.CATALOGUE)
    point = script.spyre_sim_point(workloads, "softmax", 128)
    terms = script.time_terms(point["timeline"])
    assert (terms["launches"], terms["kernels"]) == (1, 1)
    assert terms["device_us"] == pytest.approx(point["device_us"])
    ((name, work),) = point["work"].items()
    assert work["hbm_read_bytes"] == work["hbm_write_bytes"] == 128 * 1024 * 2
    assert point["parts"][name]["memory_us"] <= point["kernels"][0]["time_us"]
