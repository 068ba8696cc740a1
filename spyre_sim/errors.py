"""Errors and warnings a user of the Spyre backend sees."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class FallbackWarning(UserWarning):
    """An op without a Spyre kernel runs on the CPU (torch-spyre's ops/fallbacks.py wording)."""


@dataclass(frozen=True)
class NonFinite:
    """Where a run first produced inf/NaN from finite inputs.

    `kernel` is the kernel's name, or "h2d %x" / "d2h %x" for a host<->device conversion of
    value x and "cpu %x" for a CPU fallback; `op` is the op inside it that did it; `stage` the
    stage whose artifact was executing ("runtime" for the compiled binary); `graph` the Dynamo
    graph's index within the program.
    """

    kernel: str
    stage: str
    op: str
    graph: int = 0

    def describe(self) -> str:
        return f"kernel {self.kernel} (op {self.op}, stage {self.stage}, graph {self.graph})"


class NonFiniteWarning(UserWarning):
    """A run produced inf/NaN from finite inputs; `.location` says where it first happened."""

    def __init__(self, location: NonFinite) -> None:
        self.location = location
        super().__init__(
            f"spyre_sim: non-finite values first produced by {location.describe()}; DLFloat16 "
            "holds magnitudes up to 8.57e9 and has no infinity (its NaN/inf code reads back as "
            "NaN): rescale the inputs or keep this computation in float32")


class SpyreConfigError(ValueError):
    """A configuration value (Config field or environment variable) is out of range."""


class SpyreCompileError(RuntimeError):
    """The compiler cannot handle an op; names the op, the stage and the shapes involved."""

    def __init__(self, stage: str, op: str, shapes: Sequence[object], reason: str) -> None:
        self.stage, self.op, self.shapes, self.reason = stage, op, tuple(shapes), reason
        shape_text = ", ".join(str(list(s)) if isinstance(s, tuple) else str(s) for s in shapes)
        super().__init__(f"spyre_sim {stage}: {op} on shapes [{shape_text}]: {reason}")


class SpyreRuntimeError(RuntimeError):
    """The compiled program cannot run on the given inputs."""
