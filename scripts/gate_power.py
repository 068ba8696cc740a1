"""How many samples a side the pre-merge gate needs: asv's own verdict on simulated samples.

Draws `--comparisons` pairs of samples with lognormal noise of coefficient of variation
`--cv`, the second side's median scaled by `--step`, for each sample count in `--samples`,
and counts how often asv's rule (`regressions.stats.asv_verdict`: Mann-Whitney p < 0.002
where the counts allow it, and the medians apart by more than `--factor`) calls the second
side worse. With `--step 1` the count is the false-row rate. The spread to simulate is what
scripts/clock_spread.py measures for a family (docs/benchmarks.md).

    python scripts/gate_power.py --cv 0.075 --step 1.2 --samples 8,12,16
    python scripts/gate_power.py --cv 0.075 --step 1 --samples 8,12,16   # false rows
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from regressions.stats import asv_verdict  # noqa: E402


def flagged_share(cv: float, step: float, samples: int, comparisons: int, factor: float,
                  seed: int) -> float:
    """The share of `comparisons` simulated A/B pairs that asv's rule flags as worse."""
    sigma = math.sqrt(math.log(1 + cv * cv))  # a lognormal's sigma for this CV
    generator = np.random.default_rng(seed)
    flagged = 0
    for _ in range(comparisons):
        before = generator.lognormal(0.0, sigma, samples)
        after = generator.lognormal(math.log(step), sigma, samples)
        flagged += asv_verdict(before.tolist(), after.tolist(), factor) == 1
    return flagged / comparisons


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cv", type=float, default=0.075, help="the samples' spread")
    parser.add_argument("--step", type=float, default=1.2, help="the slowdown (1: none)")
    parser.add_argument("--samples", default="8,12,16", help="samples a side, comma-separated")
    parser.add_argument("--comparisons", type=int, default=2000)
    parser.add_argument("--factor", type=float, default=1.1, help="asv --factor")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"cv {args.cv}, step x{args.step}, factor {args.factor}, "
          f"{args.comparisons} comparisons each")
    for samples in (int(n) for n in args.samples.split(",")):
        share = flagged_share(args.cv, args.step, samples, args.comparisons, factor=args.factor,
                              seed=args.seed)
        print(f"{samples:3d} a side: flagged worse in {share:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
