"""The workload catalogue of the torch-spyre suite, in spyre-regress's form.

Self-contained (imports only torch): asv runs today's suite against older commits, and
spyre-regress loads this file by path inside the commit under test. `build(name, seq,
width=None)` gives `(program, inputs)` with fixed seeds, on the host: the backend module
(`torch_spyre.py` beside this file) moves them to the device. float16 throughout, as
torch-spyre's own tests mostly are.

The graph-size axis: `stack_<n>` is one transformer-style block (LayerNorm, then an MLP with
a residual) repeated n times, so a pass whose cost grows faster than the graph shows.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# The compiler under test, as spyre-regress's backend interface names it. Read as text.
BACKEND = "torch_spyre"
DTYPE = torch.float16
SEQ_LENGTHS = (128, 512)  # the two sizes of the grid
DEPTHS = (1, 2, 4, 8)  # the graph-size axis: blocks of `stack_<n>`


class LinearGelu(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width, 4 * width) / math.sqrt(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x @ self.weight)


class LayerNorm(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


class Softmax(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


class MLP(nn.Module):
    """Linear -> GELU -> Linear, without biases (matmuls with a pointwise op between)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Parameter(torch.randn(width, 4 * width) / math.sqrt(width))
        self.down = nn.Parameter(torch.randn(4 * width, width) / math.sqrt(4 * width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x @ self.up) @ self.down


class SwiGLU(nn.Module):
    """The gated MLP of LLaMA-style models: down(silu(x W_gate) * (x W_up))."""

    def __init__(self, width: int) -> None:
        super().__init__()
        hidden = 4 * width
        self.gate = nn.Parameter(torch.randn(width, hidden) / math.sqrt(width))
        self.up = nn.Parameter(torch.randn(width, hidden) / math.sqrt(width))
        self.down = nn.Parameter(torch.randn(hidden, width) / math.sqrt(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (F.silu(x @ self.gate) * (x @ self.up)) @ self.down


class Attention(nn.Module):
    """Multi-head self-attention, bmm-softmax-bmm, each head's view made contiguous."""

    def __init__(self, width: int, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        scale = 1 / math.sqrt(width)
        self.qkv = nn.ParameterList(nn.Parameter(torch.randn(width, width) * scale)
                                    for _ in range(3))
        self.out = nn.Parameter(torch.randn(width, width) * scale)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        seq, width = x.shape
        return x.view(seq, self.heads, width // self.heads).transpose(0, 1).contiguous()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (self.split(x @ w) for w in self.qkv)
        scores = torch.bmm(q, k.transpose(1, 2).contiguous()) / math.sqrt(q.shape[-1])
        heads = torch.bmm(torch.softmax(scores, dim=-1), v)
        return heads.transpose(0, 1).contiguous().view(x.shape) @ self.out


class Block(nn.Module):
    """LayerNorm, then an MLP with a residual: one block of the graph-size axis."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = MLP(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class Stack(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(Block(width) for _ in range(depth)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    default_width: int
    make: Callable[[int], nn.Module]

    def build(self, seq: int, width: int | None = None, seed: int = 0):
        """The program and its input at sequence length `seq`, deterministic for `seed`."""
        torch.manual_seed(seed)
        program = self.make(width or self.default_width).to(DTYPE).eval()
        for parameter in program.parameters():
            parameter.requires_grad_(False)
        generator = torch.Generator().manual_seed(seed + 1)
        x = torch.randn(seq, width or self.default_width, generator=generator)
        return program, (x.to(DTYPE),)


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("linear_gelu", "GELU of a matmul", 256, LinearGelu),
    Workload("layernorm", "LayerNorm", 1024, LayerNorm),
    Workload("softmax", "softmax over the last dimension", 1024, Softmax),
    Workload("mlp", "Linear -> GELU -> Linear", 256, MLP),
    Workload("swiglu", "SwiGLU MLP (gate, up, down)", 256, SwiGLU),
    Workload("attention", "4-head self-attention, bmm-softmax-bmm", 256, Attention),
    *(Workload(f"stack_{depth}", f"{depth} LayerNorm + MLP block(s) with residuals", 256,
               functools.partial(Stack, depth=depth)) for depth in DEPTHS),
)}
SUITE: tuple[str, ...] = tuple(n for n in WORKLOADS if not n.startswith("stack_"))
STACKS: tuple[str, ...] = tuple(f"stack_{depth}" for depth in DEPTHS)


def build(name: str, seq: int, width: int | None = None, seed: int = 0):
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; known: {sorted(WORKLOADS)}")
    return WORKLOADS[name].build(seq, width, seed)
