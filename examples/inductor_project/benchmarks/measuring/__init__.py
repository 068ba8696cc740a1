"""spyre-regress's measuring modules, copied by file (`clocks.py`, `waits.py`; standard
library and torch only): one sample per benchmark process, and a compile's wall time in parts.
A test in spyre-regress keeps the copies identical to its own. They live in this sub-package,
not beside the suite's modules, because the suite's other clocks (`Compile`, `ExecuteHostTime`)
still take several samples per process: spyre-regress's probes take a `clocks.py` at the top
of a suite as the sign that its host clocks are sampled one per process."""
