"""Write the SDSC test fixtures (tests/fixtures/torch_spyre_sdsc/): what torch-spyre's front half
emits for two small programs, compiled through this tool's backend on a CPU.

    PYTHONPATH=CHECKOUT python scripts/torch_spyre_sdsc_fixtures.py --out DIR

Each program is compiled by `backends/torch_spyre.py` (the `_C` stand-in, no card) with
torch-spyre's `sencores` at 2, so every per-core map in an SDSC has two entries and the files
stay small. Written per program: the generated wrapper (Inductor's `output_code.py`, as
`output_code.py.txt`: a text, not a module of this tree) and each kernel's directory
(`sdsc_N.json`, `bundle.mlir`), without provenance: the SDSC's `debug_handle_`
(source locations), the wrapper's `DebugHandle(...)` lines and its comments (which name
generated paths), as the stage capture drops them; SDSC as compact JSON. They are outputs of
torch-spyre's compiler, not its code.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from backends import interface

ROOT = Path(__file__).resolve().parents[1]
SENCORES = 2


def programs() -> dict[str, tuple[Any, list[Any]]]:
    """The two programs: a matmul with a GELU epilogue whose result is transposed (a
    restickify), then a CPU fallback (sin) and an add; and a LayerNorm into a softmax
    (torch-spyre's reductions)."""
    import torch
    import torch.nn.functional as F

    def matmul_transpose_sin(x: Any, w: Any) -> Any:
        return torch.sin(F.gelu(x @ w).t().contiguous()) + 1

    def layernorm_softmax(x: Any, weight: Any, bias: Any) -> Any:
        return torch.softmax(F.layer_norm(x, (x.shape[-1],), weight, bias), dim=-1)

    torch.manual_seed(0)
    half = torch.float16
    return {"matmul_transpose_sin": (matmul_transpose_sin, [torch.randn(64, 128, dtype=half),
                                                            torch.randn(128, 128, dtype=half)]),
            "layernorm_softmax": (layernorm_softmax, [torch.randn(64, 128, dtype=half),
                                                      torch.ones(128, dtype=half),
                                                      torch.zeros(128, dtype=half)])}


def canonical_wrapper(text: str) -> str:
    """The wrapper without provenance lines and comments (they name generated paths)."""
    text = re.sub(r"^[ \t]*debug_handle=DebugHandle\(.*\),?[ \t]*\n", "", text, flags=re.M)
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.lstrip().startswith("#"))


def without_provenance(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_provenance(v) for k, v in value.items() if k != "debug_handle_"}
    if isinstance(value, list):
        return [without_provenance(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    backend = interface.load_file("torch_spyre_backend", ROOT / "backends" / "torch_spyre.py")
    backend.load_compiler()
    sdsc = backend.companion("torch_spyre_sdsc")
    read, target = sdsc.Collector.read, [Path()]

    def keep(collector: Any) -> None:  # copies what the compile wrote before it is deleted
        ((graph, kernels),) = collector.graphs
        (target[0] / "output_code.py.txt").write_text(
            canonical_wrapper(Path(graph.cache_path).read_text()))
        for kernel, path in kernels:
            (target[0] / kernel).mkdir()
            shutil.copy2(path / "bundle.mlir", target[0] / kernel / "bundle.mlir")
            for sdsc_file in path.glob("sdsc_*.json"):
                document = without_provenance(json.loads(sdsc_file.read_text()))
                (target[0] / kernel / sdsc_file.name).write_text(
                    json.dumps(document, separators=(",", ":"), sort_keys=True) + "\n")
        read(collector)

    sdsc.Collector.read = keep
    for name, (program, inputs) in programs().items():
        target[0] = args.out / name
        shutil.rmtree(target[0], ignore_errors=True)
        target[0].mkdir(parents=True)
        backend.compile(program, inputs, {"sencores": SENCORES})
        print(f"wrote {target[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
