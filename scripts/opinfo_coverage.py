"""torch's OpInfo samples for every op spyre_sim claims, through `spyre_sim.compile`: the counts.

    python scripts/opinfo_coverage.py

Runs tests/e2e/test_opinfo.py's `main` (the slow test's cases, outside pytest): every sample
ends as a pass on the device, a pass on the CPU fallback, a refusal, a flagged non-finite
value, a silent mismatch, a crash or a graph break; it prints each sample that did not pass
and the counts per outcome: the table docs/measurements/spyre_sim.md gives. Needs the test
extra (pytest) and torch's internal testing package, as the test does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from backends.interface import load_file

TEST = Path(__file__).resolve().parents[1] / "tests" / "e2e" / "test_opinfo.py"


def main() -> int:
    module = load_file("test_opinfo", TEST)
    return int(module.main())


if __name__ == "__main__":
    sys.exit(main())
