"""How well does the commit bisector find a small step under noise?

Seeded histories of 32 commits, a 5% step at a random commit, 3% lognormal noise (the
simulator's run-to-run model), 10 samples per measurement batch; once without and once with
3 untestable commits in each range. Prints how often the culprit is right and the commits
measured, against the budget ceil(log2 N) + 2. With --probes, the same trials with that many
commits measured at once per round: the rounds (waves of measurements that can run at the
same time: the good and bad ends, each round's points, each extra batch of unknown
verdicts) beside ceil(log_{P+1} N), the search's rounds when every verdict is clear.

    python scripts/bisection_quality.py [--trials 40] [--commits 32] [--step 0.05]
    python scripts/bisection_quality.py --trials 200 --probes 1 2 4
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
    parser.add_argument("--probes", type=int, nargs="+", default=[1],
                        help="commits measured at once per round (one run per value)")
    args = parser.parse_args()
    budget = math.ceil(math.log2(args.commits)) + 2
    print(f"{args.trials} trials, {args.commits} commits, {args.step:.1%} step, "
          f"{args.noise:.1%} noise; budget ceil(log2 N) + 2 = {budget} commits measured")
    ok = True
    for probes in args.probes:
        search = math.ceil(math.log(args.commits) / math.log(probes + 1))
        for untestable in (0, 3):
            q = bisection_quality(args.trials, args.commits, args.step, args.noise,
                                  untestable=untestable, probes=probes)
            print(f"probes {probes}, untestable commits {untestable}: culprit right "
                  f"{q['right']:.1%} (named or bracketed by skipped commits "
                  f"{q['bracketed']:.1%}), commits measured mean "
                  f"{q['mean_commits_measured']:.2f} (max {q['max_commits_measured']}), "
                  f"batches of 10 samples mean {q['mean_batches']:.1f}, rounds mean "
                  f"{q['mean_rounds']:.1f} (max {q['max_rounds']}; the search alone "
                  f"ceil(log_{probes + 1} {args.commits}) = {search})")
            ok &= q["bracketed"] >= 0.95
            ok &= untestable > 0 or probes > 1 or q["mean_commits_measured"] <= budget
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
