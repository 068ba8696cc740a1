"""Errors and warnings a user of the Spyre backend sees."""

from __future__ import annotations

from collections.abc import Sequence


class FallbackWarning(UserWarning):
    """An op without a Spyre kernel runs on the CPU (torch-spyre's ops/fallbacks.py wording)."""


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
