"""The workload catalogue of this project's benchmarks, in spyre-regress's form.

Self-contained (imports only torch): asv runs today's suite against older commits, and
spyre-regress loads this file by path inside the commit under test. `build(name, seq,
width=None)` gives `(program, inputs)` with fixed seeds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# The compiler under test, as spyre-regress's backend interface names it, and the module of
# this project that takes Inductor's place in it (its CONFIG and compile_graph). Read as text.
BACKEND = "inductor"
COMPILER = "inductor_example.backend"
SEQ_LENGTHS = (256,)


class MLPBlock(nn.Module):
    """Linear -> GELU -> Linear: matmuls with a pointwise op between them."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, width)
        self.down = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class GatedNorm(nn.Module):
    """A gated activation, a residual and a LayerNorm: pointwise and reduction work only,
    which the generated C++ vectorizes; `scale` is the 1.0 a frontend leaves behind."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(0.1 * torch.randn(width))
        self.norm = nn.LayerNorm(width)
        self.scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gated = F.gelu(x + self.bias) * torch.sigmoid(x) * self.scale
        return self.norm(gated + x)


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    default_width: int
    make: Callable[[int], nn.Module]

    def build(self, seq: int, width: int | None = None, seed: int = 0):
        """The program and its input at sequence length `seq`, deterministic for `seed`."""
        torch.manual_seed(seed)
        program = self.make(width or self.default_width).eval()
        for parameter in program.parameters():
            parameter.requires_grad_(False)
        generator = torch.Generator().manual_seed(seed + 1)
        return program, (torch.randn(seq, width or self.default_width, generator=generator),)


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("mlp", "Linear -> GELU -> Linear", 512, MLPBlock),
    Workload("gated", "gated GELU, residual, LayerNorm", 2048, GatedNorm),
)}
# Widths of the numerical-error benchmarks (float64 references stay cheap).
NUMERICS_WIDTHS: dict[str, int] = {"mlp": 256, "gated": 256}
SUITE: tuple[str, ...] = tuple(WORKLOADS)


def build(name: str, seq: int, width: int | None = None, seed: int = 0):
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; known: {sorted(WORKLOADS)}")
    return WORKLOADS[name].build(seq, width, seed)
