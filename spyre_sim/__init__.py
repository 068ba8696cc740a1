"""spyre_sim: a timing-modelled IBM Spyre simulator, as a torch.compile backend.

    import torch, spyre_sim
    program = spyre_sim.compile(model, (x,))          # eight stages, each timed
    result = program.run(x)                           # DLFloat16 numerics + simulated device time
    result.device_time_us, result.kernels, result.trace, result.nonfinite
    program.reference(x, dtype=spyre_sim.dlfloat16)  # the eager DLFloat16 baseline
    torch.compile(model, backend="spyre")             # the same pipeline inside torch.compile
"""

from spyre_sim.config import KNOBS, Config, Knob
from spyre_sim.device import DeviceParams
from spyre_sim.dlfloat import dlfloat16
from spyre_sim.errors import (
    FallbackWarning,
    NonFinite,
    NonFiniteWarning,
    SpyreCompileError,
    SpyreConfigError,
    SpyreRuntimeError,
)
from spyre_sim.pipeline import (
    EXECUTABLE_STAGES,
    STAGES,
    Program,
    RunResult,
    capture,
    compile,
    device_clock,
    run_stage,
)

__version__ = "0.1.0"

__all__ = [
    "Config", "DeviceParams", "EXECUTABLE_STAGES", "FallbackWarning", "KNOBS", "Knob",
    "NonFinite", "NonFiniteWarning", "Program", "RunResult", "STAGES", "SpyreCompileError",
    "SpyreConfigError", "SpyreRuntimeError", "capture", "compile", "device_clock", "dlfloat16",
    "run_stage",
]
