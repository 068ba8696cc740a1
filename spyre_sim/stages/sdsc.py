"""Stage 6 — sdsc: a SuperDSC-like JSON descriptor per kernel, and the bundle that orders them.

Shaped after torch_spyre/_inductor/codegen/superdsc.py + compute_ops.py `generate_sdsc`
(torch-spyre): core and corelet folds, work slices per dim, the core-to-slice
map `Mod(floor(core_id / inner), split)`, labelled data structures with their memory
organisation, allocate nodes carrying each tensor's layout, and compute ops on the "pt" unit
(matmul) or "sfp" (everything else). The bundle lists kernels, host fallbacks and views in
program order, like bundle.mlir's `sdscbundle.sdsc_execute`.
"""

from __future__ import annotations

import base64
import logging
import math
from typing import Any

import torch

from spyre_sim import dlfloat
from spyre_sim.config import Config
from spyre_sim.errors import SpyreCompileError
from spyre_sim.executor import HostStep
from spyre_sim.ir import KernelProgram, KernelSpec, SdscBundle, canonical_json, node_to_dict
from spyre_sim.layouts import DEVICE_DTYPE_NAMES, DTYPE_BYTES, TensorLayout, elems_per_stick
from spyre_sim.ops import OPS

log = logging.getLogger("spyre_sim.sdsc")
STAGE = "sdsc"
SDSC_BUNDLE_VERSION = 2  # 2: constants as DLFloat16 codes (1: IEEE fp16)


def core_to_slice(splits: list[tuple[str, int]]) -> dict[str, dict[str, int]]:
    """Core id -> work-slice coordinates, the innermost split varying fastest."""
    mapping: dict[str, dict[str, int]] = {}
    total = math.prod(n for _, n in splits) if splits else 1
    for core in range(total):
        coords, inner = {}, 1
        for label, n in reversed(splits):
            coords[label] = (core // inner) % n
            inner *= n
        mapping[str(core)] = dict(sorted(coords.items()))
    return mapping


def _labeled(spec: KernelSpec) -> list[dict[str, Any]]:
    matmul_b = next((op.inputs[1] for op in spec.ops if op.op in ("mm", "bmm")), None)
    labeled = []
    for index, arg in enumerate(spec.args):
        kind = "OUTPUT" if arg.role == "output" else "KERNEL" if arg.name == matmul_b else "INPUT"
        labeled.append({
            "ldsIdx_": index, "dsName_": arg.name, "dsType_": kind, "role_": arg.role,
            "wordLength": DTYPE_BYTES[arg.layout.dtype],
            "dataFormat_": DEVICE_DTYPE_NAMES[arg.layout.dtype],
            "memOrg_": {"hbm": {"isPresent": int(arg.memory == "hbm")},
                        "lx": {"isPresent": 1}},
            "bytes_": arg.nbytes,
        })
    return labeled


def _allocate(spec: KernelSpec) -> list[dict[str, Any]]:
    nodes = []
    for index, arg in enumerate(spec.args):
        layout = arg.layout
        nodes.append({
            "nodeType_": "allocate", "name_": f"allocate-{arg.name}_{arg.memory}",
            "ldsIdx_": index, "component_": arg.memory,
            "layoutDimOrder_": list(layout.device_dims),
            "stickDimOrder_": [f"d{layout.stick_dim}"],
            "stickSize_": [elems_per_stick(layout.dtype)],
            "layout_": layout.to_dict(),
        })
    return nodes


def _compute_ops(spec: KernelSpec) -> list[dict[str, Any]]:
    ops = []
    for node in spec.ops:
        definition = OPS[node.op]
        ops.append({
            "exUnit": "pt" if definition.kind == "matmul" else "sfp",
            "opFuncName": definition.opfunc,
            "attributes_": {"dataFormat_": DEVICE_DTYPE_NAMES[node.dtype], "fidelity_": "regular",
                            "accumulation_": spec.accumulation},
            "location": "Inner",
            "inputLabeledDs": [a for a in node.value_inputs],
            "outputLabeledDs": [node.name],
            "node_": node_to_dict(node),
        })
    return ops


def descriptor(spec: KernelSpec) -> dict[str, Any]:
    splits = list(spec.splits)
    cores = math.prod(n for _, n in splits) if splits else 1
    sizes = dict(spec.iteration_space)
    tile = dict(spec.tiling)
    opfunc = OPS[spec.ops[0].op].opfunc
    return {
        "sdscFoldProps_": [{"factor_": 1, "label_": "time"}],
        "coreFoldProp_": {"factor_": cores, "label_": "core"},
        "coreletFoldProp_": {"factor_": 1, "label_": "corelet"},
        "numCoresUsed_": cores,
        "numWkSlicesPerDim_": dict(splits),
        "coreIdToWkSlice_": core_to_slice(splits),
        "kernelKind_": spec.kind,
        "dscs_": [{opfunc: {
            "numCoresUsed_": cores, "numCoreletsUsed_": 1, "coreIdsUsed_": list(range(cores)),
            "N_": {"name_": "n", **{f"{label}_": size for label, size in sizes.items()}},
            "dataStageParam_": {"0": {
                "ss_": {"name_": "core", **{f"{label}_": n for label, n in tile.items()}},
                "el_": {"name_": "core", **{f"{label}_": n for label, n in tile.items()}},
            }},
            "labeledDs_": _labeled(spec),
            "scheduleTree_": _allocate(spec),
            "computeOp_": _compute_ops(spec),
        }}],
    }


def _constant_payload(name: str, tensor: torch.Tensor) -> dict[str, Any]:
    """A resident constant as SEN169_FP16 (DLFloat16) codes, little-endian uint16, base64.

    Finite values beyond DLFloat16's range would be stored as its NaN/inf code, where no run
    could see that they were finite: the compiler refuses them here instead."""
    codes = dlfloat.encode(tensor.detach()).flatten()
    if bool(torch.isfinite(tensor).all()) and bool(((codes & 0x7FFF) == dlfloat.NINF_CODE).any()):
        raise SpyreCompileError(STAGE, f"constant {name}", [tuple(tensor.shape)],
                                f"values up to {float(tensor.abs().max()):.3g} do not fit "
                                f"DLFloat16 (largest finite {dlfloat.MAX:.4g}); scale the "
                                "constant or compute with it on the host")
    data = codes.numpy().astype("<u2").tobytes()
    return {"shape": list(tensor.shape), "dl16_base64": base64.b64encode(data).decode()}


def run(program: KernelProgram, config: Config) -> SdscBundle:
    del config
    layouts = dict(program.layouts)
    bundle: list[dict[str, Any]] = []
    sdscs = {}
    for step in program.steps:
        if isinstance(step, KernelSpec):
            sdscs[step.name] = descriptor(step)
            bundle.append({"sdsc_execute": step.name})
        elif isinstance(step, HostStep):
            bundle.append({"host_op": node_to_dict(step.node),
                           "input_layouts": [_layout_dict(lay) for lay in step.input_layouts],
                           "output_layout": _layout_dict(step.output_layout)})
        else:
            bundle.append({"view": node_to_dict(step.node)})
    document = {
        "version": SDSC_BUNDLE_VERSION,
        "graph": program.index,
        "inputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype,
                    "host_dtype": v.host_dtype, "kind": v.kind,
                    "layout": layouts[v.name].to_dict()} for v in program.inputs],
        "constants": {name: _constant_payload(name, t) for name, t in program.constants},
        "outputs": [None if name is None else
                    {"name": name, "host_dtype": dtype, "layout": layouts[name].to_dict()}
                    for name, dtype in zip(program.outputs, program.output_host_dtypes,
                                           strict=True)],
        "bundle": bundle,
        "sdscs": sdscs,
    }
    log.info("sdsc: %d descriptors", len(sdscs))
    return SdscBundle(program.index, canonical_json(document))


def _layout_dict(layout: TensorLayout | None) -> dict[str, Any]:
    """A host op's tensor layout in the bundle: the kernel stage lays out every one."""
    if layout is None:
        raise TypeError("a host op of the kernel program has no layout")
    return layout.to_dict()
