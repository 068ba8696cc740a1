"""torch-spyre's suite. `spyre_sim`, whose timing model prices the device program a compile
writes (bench_execute.py), is written beside this package (suite.json's `tool_packages`);
asv puts only this package on the import path, so its parent goes there too, first: the
copy the suite was written with is the model its device-time rows are versioned by."""

import sys
from pathlib import Path

_SUITE = str(Path(__file__).resolve().parents[1])
if _SUITE not in sys.path:
    sys.path.insert(0, _SUITE)
