"""scripts/torch_spyre_device.py's tables: the summary of both compilers' programs, each
kernel launch's modelled time, and a card's figures beside the model's (the script's own
measuring runs torch-spyre and is run by hand; docs/torch-spyre-device-time.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

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
