"""Stage 7 — backend: the simulated backend compiler (dxp_standalone): SuperDSC JSON -> binary.

torch-spyre hands its SuperDSC bundle to IBM's closed DeepTools compiler, which emits a
program the runtime loads (historically `g2.graph.cbor`; torch_spyre/execution/async_compile.py).
This stage plays that part: it validates each descriptor, places every DRAM tensor in one of
the 7 argument segments (torch_spyre/_inductor/constants.py SEGMENT_OFFSETS), derives each
kernel's work from the descriptor alone, models the DXP compile cost, and encodes the whole
program as CBOR.
"""

from __future__ import annotations

import base64
import logging
import math
from typing import Any

import cbor2

from spyre_sim.config import Config
from spyre_sim.cost import derive_work, op_work
from spyre_sim.errors import SpyreCompileError
from spyre_sim.ir import Binary, SdscBundle, canonical_json

log = logging.getLogger("spyre_sim.backend")
STAGE = "backend"
SDSC_BUNDLE_VERSION = 2  # the sdsc stage's artifact, as this stage reads it
PROGRAM_BINARY_VERSION = 2  # what it writes, as the runtime loads it
SEGMENT_BYTES = 0x4_0000_0000  # 16 GiB per argument segment (constants.py SEGMENT_OFFSETS)
SEGMENTS = 7
MAX_KERNEL_TENSORS = 6  # non-intermediate tensors one bundle can address
# Modelled DXP compile time (estimate): a fixed start-up plus a cost per compute op and per
# core schedule. DXP dominates torch-spyre's compile wall time (epic #4117).
DXP_BASE_S, DXP_PER_OP_S, DXP_PER_CORE_S = 0.05, 0.004, 0.0005


def _kernel_entry(name: str, sdsc: dict[str, Any]) -> dict[str, Any]:
    (opfunc_body,) = sdsc["dscs_"][0].values()
    labeled = opfunc_body["labeledDs_"]
    schedule = {node["ldsIdx_"]: node for node in opfunc_body["scheduleTree_"]}
    external = [ds for ds in labeled if ds["role_"] != "intermediate"]
    if len(external) > MAX_KERNEL_TENSORS + 1:
        raise SpyreCompileError(STAGE, name, [len(external)],
                                f"a kernel addresses at most {MAX_KERNEL_TENSORS} tensors "
                                "plus its output (argument segments)")
    shapes = {ds["dsName_"]: tuple(schedule[ds["ldsIdx_"]]["layout_"]["host_size"])
              for ds in labeled}
    nodes = [op["node_"] for op in opfunc_body["computeOp_"]]
    for node in nodes:
        for ref in node["inputs"]:
            if isinstance(ref, dict) and ref["ref"] not in shapes:
                raise SpyreCompileError(STAGE, f"{name}/{node['op']}", [tuple(node["shape"])],
                                        f"operand {ref['ref']!r} is not a labeled data structure")
    ops = tuple(op_work(n["op"], tuple(n["shape"]),
                        tuple(shapes[r["ref"]] for r in n["inputs"] if isinstance(r, dict)))
                for n in nodes)
    read = sum(ds["bytes_"] for ds in labeled
               if ds["role_"] == "input" and ds["memOrg_"]["hbm"]["isPresent"])
    write = sum(ds["bytes_"] for ds in labeled
                if ds["role_"] == "output" and ds["memOrg_"]["hbm"]["isPresent"])
    space = tuple((k[:-1], v) for k, v in opfunc_body["N_"].items() if k != "name_")
    splits = tuple(sdsc["numWkSlicesPerDim_"].items())
    accumulation = opfunc_body["computeOp_"][0]["attributes_"]["accumulation_"]
    work = derive_work(name, sdsc["kernelKind_"], space, splits, read_bytes=read, write_bytes=write,
                       ops=ops, accumulation=accumulation)
    return {
        "name": name,
        "ops": nodes,
        "accumulation": accumulation,
        "cores": sdsc["numCoresUsed_"],
        "tensors": [{"name": ds["dsName_"], "role": ds["role_"],
                     "memory": "hbm" if ds["memOrg_"]["hbm"]["isPresent"] else "lx",
                     "layout": schedule[ds["ldsIdx_"]]["layout_"]} for ds in labeled],
        "work": work.to_dict(),
    }


def _place(entries: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Give every DRAM tensor a segment and a 128-byte-aligned offset."""
    placement: dict[str, dict[str, int]] = {}
    cursor = [0] * SEGMENTS
    segment = 0
    for entry in entries:
        for tensor in entry["tensors"]:
            if tensor["memory"] != "hbm" or tensor["name"] in placement:
                continue
            size = 128 * math.prod(tensor["layout"]["device_size"][:-1])
            if cursor[segment] + size > SEGMENT_BYTES:
                segment += 1
                if segment >= SEGMENTS:
                    raise SpyreCompileError(STAGE, entry["name"], [size],
                                            "program does not fit in 7 x 16 GiB segments")
            placement[tensor["name"]] = {"segment": segment, "offset": cursor[segment]}
            cursor[segment] += size
    return placement


def _summary(program: dict[str, Any]) -> str:
    def scrub(value: Any) -> Any:
        if isinstance(value, bytes):
            return f"<{len(value)} bytes>"
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value
    return canonical_json(scrub(program)) + "\n"


def run(bundle: SdscBundle, config: Config) -> Binary:
    del config
    document = bundle.data()
    if document.get("version") != SDSC_BUNDLE_VERSION:
        raise SpyreCompileError(STAGE, "bundle", [], f"SuperDSC bundle version "
                                f"{document.get('version')!r}; this backend reads "
                                f"{SDSC_BUNDLE_VERSION}")
    entries = {name: _kernel_entry(name, sdsc) for name, sdsc in document["sdscs"].items()}
    steps = []
    for item in document["bundle"]:
        if "sdsc_execute" in item:
            steps.append({"type": "compute", "kernel": entries[item["sdsc_execute"]]})
        elif "host_op" in item:
            steps.append({"type": "host", "node": item["host_op"],
                          "input_layouts": item["input_layouts"],
                          "output_layout": item["output_layout"]})
        else:
            steps.append({"type": "view", "node": item["view"]})
    placement = _place(list(entries.values()))
    op_count = sum(len(e["ops"]) for e in entries.values())
    core_count = sum(e["cores"] for e in entries.values())
    modelled_s = DXP_BASE_S + DXP_PER_OP_S * op_count + DXP_PER_CORE_S * core_count
    constants = {
        name: {"shape": c["shape"], "dl16": base64.b64decode(c["dl16_base64"])}
        for name, c in document["constants"].items()
    }
    program = {
        "version": PROGRAM_BINARY_VERSION,
        "format": "spyre-sim-program",
        "graph": document["graph"],
        "inputs": document["inputs"],
        "outputs": document["outputs"],
        "constants": constants,
        "steps": steps,
        "placement": placement,
        "dxp": {"modelled_compile_s": round(modelled_s, 6), "kernels": len(entries)},
    }
    log.info("backend: %d kernels, modelled DXP compile %.3f s", len(entries), modelled_s)
    return Binary(bundle.index, cbor2.dumps(program, canonical=True), _summary(program))
