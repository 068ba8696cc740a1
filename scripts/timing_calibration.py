"""The timing model against torch-spyre's device measurements of Spyre matmul kernels.

    python scripts/timing_calibration.py [--held-out] [--set NAME=VALUE ...]

Runs `spyre_sim.calibrate` (also `python -m spyre_sim.calibrate`): compiles `torch.mm(a, b)`
for each measured kernel through the whole pipeline at 32 cores, numerics and noise off,
and prints each kernel's modelled time beside the measured one, the error, the split
torch-spyre measured and the one the model chose, then the maximum and RMS error; it exits 1
when a target is off by more than 15%. `--set` reruns with one device parameter changed. The
measured times are torch-spyre's (the design note "The Spyre matmul work-division cost model,
from first principles", §9); the model is deterministic, so a rerun prints the same table:
the ones docs/measurements/timing-model.md gives.
"""

from __future__ import annotations

import sys

from spyre_sim import calibrate

if __name__ == "__main__":
    sys.exit(calibrate.main(sys.argv[1:]))
