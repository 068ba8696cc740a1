"""The simulated Spyre card (`spyre_sim`) as a compiler under test (`backends.interface`).

Loaded by path inside the commit under test, so it imports only the standard library, torch
and that commit's `spyre_sim`, and copes with older builds as the probe does: a Config field
the build lacks is dropped, a Config without `from_dict` is built from keyword arguments.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch

import spyre_sim

NAME = "spyre_sim"
STAGES: tuple[str, ...] = tuple(spyre_sim.STAGES)
DEVICE_CLOCK = True  # the timing model's device time, per call
# A knob can be limited to its first n applications (`Config.knob_scope`), each logged as a
# `decision <knob>#<n>` line (`decisions_logged`): the knob probe names the application that
# matters, and tries only the knobs a compile consults.
SCOPES_KNOBS = True
# The timing model's run-to-run noise: off for a noise-free measurement (a knob's effect, a
# minimization's ratio), and drawn afresh per compile for samples that must be independent.
QUIET: dict[str, Any] = {"noise_cv": 0.0}
INDEPENDENT: dict[str, Any] = {"noise_seed": None}


@dataclasses.dataclass(frozen=True)
class Knob:
    name: str
    stage: str
    choices: tuple[Any, ...]
    default: Any


@dataclasses.dataclass(frozen=True, kw_only=True)
class Execution:
    outputs: tuple[Any, ...]
    host_s: float
    device_us: float | None
    kernels: tuple[Any, ...] = ()  # the simulator's KernelRecords (interface: KernelTime's fields)
    trace: dict | None = None
    nonfinite: str | None = None


class Compiled:
    """A `spyre_sim.compile` result: seconds per stage, and calls on the simulated device."""

    def __init__(self, program: Any) -> None:
        self.program = program
        self.compile_s: dict[str, float] = dict(program.compile_times)

    def run(self, *inputs: Any) -> Execution:
        start = time.perf_counter()
        result = self.program.run(*inputs)
        took = time.perf_counter() - start
        nonfinite = getattr(result, "nonfinite", None)  # builds before the check: none
        return Execution(outputs=tuple(result.outputs), host_s=took,
                         device_us=float(result.device_time_us),
                         kernels=tuple(result.kernels), trace=result.trace,
                         nonfinite=None if nonfinite is None else nonfinite.describe())

    def baselines(self, *inputs: Any) -> tuple[Any, Any, Any]:
        """The first output in float64, and eager with every op rounded to the device's
        16-bit format (DLFloat16 where this build has it) and to IEEE fp16."""
        device_format = getattr(spyre_sim, "dlfloat16", torch.float16)
        return tuple(self.program.reference(*inputs, **kwargs)[0] for kwargs in (
            {}, {"dtype": device_format}, {"dtype": torch.float16}))

    def stage_outputs(self, *inputs: Any) -> dict[str, tuple[Any, ...]]:
        """The outputs of each stage whose artifact executes (before the binary exists)."""
        return {stage: self.program.run_stage(stage, *inputs)
                for stage in spyre_sim.EXECUTABLE_STAGES}


def known_settings(values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The Config fields (and device parameters) of `values` this build knows, and the names
    of those it does not: a Config recorded at the bad commit still applies at the good one,
    and what it loses is reported, never fatal."""
    known = {f.name for f in dataclasses.fields(spyre_sim.Config)}
    kept = {k: v for k, v in values.items() if k in known}
    dropped = sorted(set(values) - known)
    device = kept.get("device")
    if isinstance(device, dict) and hasattr(spyre_sim, "DeviceParams"):
        device_known = {f.name for f in dataclasses.fields(spyre_sim.DeviceParams)}
        dropped += sorted(f"device.{k}" for k in set(device) - device_known)
        kept["device"] = {k: v for k, v in device.items() if k in device_known}
    return kept, dropped


def config(values: Mapping[str, Any] | None = None) -> Any:
    """This build's `spyre_sim.Config` with `values`; fields the build lacks are dropped."""
    kept, _ = known_settings(values or {})
    if hasattr(spyre_sim.Config, "from_dict"):
        return spyre_sim.Config.from_dict(kept)
    kept.pop("device", None)  # builds before from_dict take neither as a dict
    kept.pop("knob_scope", None)
    return spyre_sim.Config(**kept)


def knobs() -> list[Knob]:
    defaults = spyre_sim.Config()
    return [Knob(k.name, k.stage, tuple(k.choices), getattr(defaults, k.name))
            for k in spyre_sim.KNOBS]


def compile(program: Any, inputs: Sequence[Any],
            values: Mapping[str, Any] | None = None) -> Compiled:
    return Compiled(spyre_sim.compile(program, inputs, config(values)))


def reference(program: Any, inputs: Sequence[Any]) -> tuple[Any, ...]:
    """float64 outputs of the program as Dynamo captured it, run eagerly on the CPU."""
    return tuple(spyre_sim.compile(program, inputs, config()).reference(*inputs))


def graph(program: Any, inputs: Sequence[Any]) -> tuple[Any, list[Any]]:
    """The ATen graph spyre_sim's pipeline starts from (Dynamo and AOT Autograd's capture,
    the first graph) and its example inputs: what the minimizer cuts down."""
    captured = spyre_sim.capture(program, inputs).graphs[0]
    return captured.graph_module, list(captured.example_inputs)


def capture(program: Any, inputs: Sequence[Any], values: Mapping[str, Any] | None,
            out_dir: Path) -> Path:
    """One compile with `TORCH_COMPILE_DEBUG=1` into `out_dir`: the `compile-NNN` written.

    torch reads the same variable and opens its own (empty) debug logs under Dynamo's
    `debug_dir_root`, by default `torch_compile_debug/` in the working directory: pointed
    into `out_dir`, so a capture leaves nothing where its user stands."""
    out_dir = Path(out_dir)
    before = set(out_dir.glob("compile-*"))
    saved = {k: os.environ.get(k) for k in ("TORCH_COMPILE_DEBUG", "SPYRE_SIM_DEBUG_DIR")}
    os.environ.update(TORCH_COMPILE_DEBUG="1", SPYRE_SIM_DEBUG_DIR=str(out_dir))
    try:
        with torch._dynamo.config.patch(debug_dir_root=str(out_dir / "torch_compile_debug")):
            spyre_sim.compile(program, inputs, config(values))
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    (written,) = set(out_dir.glob("compile-*")) - before
    return written


def settings(values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """This build's whole Config under `values` (`Config.to_dict()`; empty for a build
    without it)."""
    built = config(values)
    return built.to_dict() if hasattr(built, "to_dict") else {}


def environment() -> dict[str, str]:
    return {"torch": torch.__version__,
            "spyre_sim": getattr(spyre_sim, "__version__", "unknown")}


def build_path() -> str:
    """Where this process imported spyre_sim from: the checkout a reproducer ran."""
    return str(Path(spyre_sim.__file__).parent)


# The regions a compile is counted in under callgrind, in order: one per stage.
WORK_REGIONS: tuple[str, ...] = STAGES


def compile_in_regions(program: Any, inputs: Sequence[Any],
                       values: Mapping[str, Any] | None,
                       region: Callable[[str], AbstractContextManager[Any]]) -> None:
    """One compile, stage by stage, each inside `region(stage)` (the caller counts it):
    Dynamo's capture, then `run_stage` over every captured graph, as the compile-work
    benchmark delimits them."""
    built = config(values)
    torch._dynamo.reset()
    with region(STAGES[0]):
        artifacts = list(spyre_sim.capture(program, inputs).graphs)
    for stage in STAGES[1:]:
        with region(stage):
            artifacts = [spyre_sim.run_stage(stage, artifact, built) for artifact in artifacts]


@contextlib.contextmanager
def decisions_logged() -> Iterator[list[str]]:
    """The decisions spyre_sim's stages log meanwhile (`config.Decisions`: `decision
    <knob>#<n> <detail> -> <value>`), in this process: every question a stage asks of a knob."""
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message.startswith("decision "):
                records.append(message)

    logger = logging.getLogger("spyre_sim")
    handler, level = Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
