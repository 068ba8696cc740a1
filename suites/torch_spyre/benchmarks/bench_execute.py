"""Execute family: torch-spyre's compiled program on spyre_sim's modelled Spyre card.

There is no card here and nothing runs: the device program a compile writes (every kernel's
SDSC and the generated wrapper) is priced by spyre_sim's timing model (the backend's
`Compiled.run`; spyre-regress's docs/torch-spyre-device-time.md). The figure is noise-free and
deterministic: every sample of a commit is the same, so any change between commits is the
compiler's. Each row reads the compile its point's compile-time rows timed in the same round
(`compiled.sample`), priced after the timing: device time costs no compile of its own.

`ExecuteDeviceTime` is the device time per call (launch gaps, kernels, the copies and host
ops of CPU fallbacks), in seconds as asv keeps time; `ExecuteUnmodelled` counts the kernels the
model could not time (each is a named row of the investigation, never a zero): a rise there
says the device time left something out.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from benchmarks import compiled
from benchmarks import torch_spyre as backend
from benchmarks.bench_compile import SEQ_LENGTHS, WORKLOADS, RoundMeasured


def model_version() -> str:
    """The reader's version and a digest of the model's sources (the reader, its pricing and
    spyre_sim's cost model and device parameters): another model starts another series."""
    from spyre_sim import cost, device

    timing = backend.companion("torch_spyre_timing")
    sources = (timing.sdsc.__file__, timing.__file__, cost.__file__, device.__file__)
    digest = hashlib.sha256(b"".join(Path(str(s)).read_bytes() for s in sources))
    return f"{timing.sdsc.READER_VERSION}-{digest.hexdigest()[:12]}"


MODEL = model_version()


class ExecuteDeviceTime(RoundMeasured):
    params = (WORKLOADS, SEQ_LENGTHS)
    param_names = ("workload", "seq")
    version = f"torch-spyre-execute-device-{MODEL}"

    def setup(self, _: int, workload: str, seq: int) -> None:
        self.take(workload, seq, "device:seconds")

    def time_device(self, _: int, workload: str, seq: int) -> None:
        self.report()


class ExecuteUnmodelled(RoundMeasured):
    params = (WORKLOADS, SEQ_LENGTHS)
    param_names = ("workload", "seq")
    unit = "kernels"
    version = f"torch-spyre-execute-unmodelled-{MODEL}"

    def setup(self, _: int, workload: str, seq: int) -> None:
        self.count = compiled.sample(workload, seq, "device:unmodelled")

    def track_unmodelled_kernels(self, _: int, workload: str, seq: int) -> float:
        return float(self.count or 0)
