"""How well does the commit bisector find a small step under noise?

Seeded histories of 32 commits, a 5% step at a random commit, 3% lognormal noise (the
simulator's run-to-run model), 10 samples per measurement batch; once without and once with
3 untestable commits in each range. Prints how often the culprit is right and the commits
measured, against the budget ceil(log2 N) + 2.

    python scripts/bisection_quality.py [--trials 40] [--commits 32] [--step 0.05]
"""

from __future__ import annotations

import argparse
import math
import sys

from regressions.groundtruth.bisection_histories import bisection_quality


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--commits", type=int, default=32)
    parser.add_argument("--step", type=float, default=0.05)
    parser.add_argument("--noise", type=float, default=0.03)
    args = parser.parse_args()
    budget = math.ceil(math.log2(args.commits)) + 2
    print(f"{args.trials} trials, {args.commits} commits, {args.step:.1%} step, "
          f"{args.noise:.1%} noise; budget ceil(log2 N) + 2 = {budget} commits measured")
    ok = True
    for untestable in (0, 3):
        q = bisection_quality(args.trials, args.commits, args.step, args.noise, untestable)
        print(f"untestable commits {untestable}: culprit right {q['right']:.0%} (named or "
              f"bracketed by skipped commits {q['bracketed']:.0%}), commits measured mean "
              f"{q['mean_commits_measured']:.2f} (max {q['max_commits_measured']}), batches "
              f"of 10 samples mean {q['mean_batches']:.1f}")
        ok &= q["bracketed"] >= 0.95
        ok &= untestable > 0 or q["mean_commits_measured"] <= budget
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
