"""spyre_sim: a timing-modelled IBM Spyre simulator, as a torch.compile backend.

    import torch, spyre_sim
    program = spyre_sim.compile(model, (x,))          # eight stages, each timed
    result = program.run(x)                           # DLFloat16 numerics + simulated device time
    result.device_time_us, result.kernels, result.trace, result.nonfinite
    program.reference(x, dtype=spyre_sim.dlfloat16)  # the eager DLFloat16 baseline
    torch.compile(model, backend="spyre")             # the same pipeline inside torch.compile

The public names load on first use (PEP 562), so `spyre_sim.STAGES` costs no torch import:
tools that only need the stage names stay quick to start.
"""

import importlib

from spyre_sim.stages import EXECUTABLE_STAGES, STAGES

__version__ = "0.1.0"

_EXPORTS = {
    "Config": "spyre_sim.config", "KNOBS": "spyre_sim.config", "Knob": "spyre_sim.config",
    "DeviceParams": "spyre_sim.device",
    "FallbackWarning": "spyre_sim.errors", "SpyreCompileError": "spyre_sim.errors",
    "SpyreConfigError": "spyre_sim.errors", "SpyreRuntimeError": "spyre_sim.errors",
    "NonFinite": "spyre_sim.errors", "NonFiniteWarning": "spyre_sim.errors",
    "dlfloat16": "spyre_sim.dlfloat",
    "Program": "spyre_sim.pipeline", "RunResult": "spyre_sim.pipeline",
    "capture": "spyre_sim.pipeline", "compile": "spyre_sim.pipeline",
    "device_clock": "spyre_sim.pipeline", "run_stage": "spyre_sim.pipeline",
}

__all__ = ["EXECUTABLE_STAGES", "STAGES", *sorted(_EXPORTS)]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'spyre_sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
