"""The workload catalogue: the programs the benchmarks, the bisectors and the reports measure.

Self-contained on purpose (imports only torch): asv runs the current suite against historical
compiler code, and the regression tools load this file by path from the tree under test, so
it must not depend on anything else in the project.

Each workload builds a fresh program at a sequence length: `(callable, inputs)` with fixed
seeds. `width` overrides the model width (tests use small widths; benchmarks the defaults).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

# Sequence lengths: decode (1), the prime 127 that cannot be split on M next to 128, and
# prefill sizes up to the [1024, 4096] class of the compiler-debugging guide.
SEQ_LENGTHS = (1, 127, 128, 512, 1024)
# The compiler under test, as the regression tools' backend interface names it
# (backends/interface.py); read as text, never imported, by regressions/probing/suite.py.
BACKEND = "spyre_sim"


class MLPBlock(nn.Module):
    """Linear -> GELU -> Linear, the block of the issue's compile-time target."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, width)
        self.down = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class AttentionBlock(nn.Module):
    """Causal multi-head self-attention with fused QKV and output projections."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=-1)
        shape = (batch, seq, self.heads, width // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(attended.transpose(1, 2).reshape(batch, seq, width))


class TransformerBlock(nn.Module):
    """Attention then MLP, each with a residual: the program the minimizer starts from."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attention = AttentionBlock(width, heads)
        self.mlp = MLPBlock(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(x)
        return x + self.mlp(x)


class RMSNorm(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width) + 0.1 * torch.randn(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-6)


class EmbeddingProjection(nn.Module):
    """Token embedding (a CPU fallback on Spyre) followed by a projection."""

    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.project = nn.Linear(width, width)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.project(self.embed(ids))


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _linear(width: int) -> nn.Module:
    return nn.Linear(width, width)


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    default_width: int
    make: Callable[[int], nn.Module | Callable]
    # hidden: [seq, width]; batched: [1, seq, width]; tokens: [seq] token ids
    input_kind: Literal["hidden", "batched", "tokens"] = "hidden"

    def build(self, seq: int, width: int | None = None, seed: int = 0):
        """The program and its inputs at sequence length `seq`, deterministic for `seed`."""
        width = width or self.default_width
        torch.manual_seed(seed)
        program = self.make(width)
        if isinstance(program, nn.Module):
            program = program.eval()
            for parameter in program.parameters():
                parameter.requires_grad_(False)
        generator = torch.Generator().manual_seed(seed + 1)
        if self.input_kind == "tokens":
            inputs = (torch.randint(0, 4 * width, (seq,), generator=generator),)
        elif self.input_kind == "batched":
            inputs = (torch.randn(1, seq, width, generator=generator),)
        else:
            inputs = (torch.randn(seq, width, generator=generator),)
        return program, inputs


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("linear", "one Linear layer (a matmul plus bias)", 4096, _linear),
    Workload("mlp", "Linear -> GELU -> Linear", 4096, MLPBlock),
    Workload("attention", "causal self-attention, fused QKV, 8 heads", 1024,
             lambda w: AttentionBlock(w, 8), input_kind="batched"),
    Workload("rmsnorm", "RMSNorm over the hidden dim", 4096, RMSNorm),
    Workload("layernorm", "LayerNorm over the hidden dim", 4096, lambda w: nn.LayerNorm(w)),
    Workload("softmax", "softmax over the hidden dim", 4096, lambda w: _softmax),
    Workload("embedding", "token embedding (CPU fallback) then a projection", 1024,
             lambda w: EmbeddingProjection(4 * w, w), input_kind="tokens"),
    Workload("block", "attention then MLP with residuals (8 heads)", 1024,
             lambda w: TransformerBlock(w, 8), input_kind="batched"),
)}


# Moderate widths for the numerical-error benchmarks: float64 references stay cheap, and K = 512
# is deep enough for accumulation precision to show (fp16 matmul accumulation raised linear's
# RMSE from 1.15x to 1.71x that of eager fp16 at seq 128).
NUMERICS_WIDTHS: dict[str, int] = {
    "linear": 512, "mlp": 512, "attention": 256, "rmsnorm": 512, "layernorm": 512,
    "softmax": 512, "embedding": 256, "block": 256,
}


# The workloads the asv suite measures ("block" exists for the minimizer: it is the sum of two).
SUITE: tuple[str, ...] = ("linear", "mlp", "attention", "rmsnorm", "layernorm", "softmax",
                          "embedding")


def build(name: str, seq: int, width: int | None = None, seed: int = 0):
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; known: {sorted(WORKLOADS)}")
    return WORKLOADS[name].build(seq, width, seed)
