"""The newest-edge screen's trade on short noisy series, three ways of screening the ends.

Which scale the end commits are screened with, and what each choice finds and falsely flags.

The table "The newest-edge screen on short noisy series" of docs/measurements/detection.md.
Detection screens an end commit as a one-commit excursion before it tests that end
(`changepoints._NoisyAnalysis._edge_scale`, docs/explanation/detection.md "Short segments").
This runs `detect.run_detection` three ways over the same seeded series:

- `whole`: both ends screened with the whole series' commit scale (the tree before the
  newest commit got its own scale);
- `newest` (the detector as it is): the newest commit screened with the scale of the commits
  before it, the oldest with the whole series';
- `both`: each end screened with the scale of the commits beside it, without it.

The series: `--commits` lengths (default 4-7) x `--offsets` (default 3% and 6%, the log-sd of
a level each commit draws, noise that moves all its samples together) = one case each; per
case `--flat` no-change series (default 500) in one detection run and `--steps` series
(default 200) whose newest commit is x`--step` (1.3) in another; 20 samples a commit with
`--noise` (3%) lognormal noise within it. Per case and variant it prints the step series
with a regression at the newest commit, and the no-change series' false edge alarms (newest,
oldest); then the totals. Pure computation (no clock is read): seconds on one core.

    python scripts/edge_screen.py
    python scripts/edge_screen.py --commits 4 --offsets 0.03 --flat 50 --steps 20 --seed 7
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

import numpy as np

from regressions.detection import changepoints, detect, outliers

VARIANTS = ("whole", "newest", "both")


def _scale(variant: str):
    """An `_edge_scale` for `variant` (`newest` is the detector's own)."""
    own = changepoints._NoisyAnalysis._edge_scale

    def edge_scale(self, kept: list[int], which: outliers.Edge) -> float:
        means = self.means[kept]
        if variant == "whole":
            return self.scale
        if variant == "both" and which == "oldest":
            return outliers.commit_scale(means[1:], self.error)
        return own(self, kept, which)

    return edge_scale


@contextlib.contextmanager
def screened_as(variant: str) -> Iterator[None]:
    """Detection with the end commits screened as `variant` says, inside the block."""
    analysis = changepoints._NoisyAnalysis
    own = analysis._edge_scale
    analysis._edge_scale = _scale(variant)  # type: ignore[method-assign]
    try:
        yield
    finally:
        analysis._edge_scale = own  # type: ignore[method-assign]


def short_series(count: int, *, commits: int, offset: float, noise: float, step: float,
                 seed: int) -> list[detect.Series]:
    """`count` series of `commits` commits x 20 samples: each commit's level drawn with log-sd
    `offset`, samples lognormal (log-sd `noise`) around it, the newest level x`step`."""
    rng = np.random.default_rng(seed)
    hashes = tuple(f"{c:040x}" for c in range(commits))
    made = []
    for i in range(count):
        levels = np.exp(rng.normal(0.0, offset, commits))
        levels[-1] *= step
        samples = levels[:, None] * np.exp(rng.normal(0.0, noise, (commits, 20)))
        made.append(detect.Series(machine="short", env="synthetic",
                                  benchmark="execute.Short.time_run", params=f"({seed}, {i})",
                                  commits=hashes, positions=tuple(range(commits)),
                                  samples=tuple(tuple(s) for s in samples.tolist())))
    return made


def newest_found(series: list[detect.Series], variant: str) -> int:
    """Series with a regression reported at their newest commit."""
    with screened_as(variant):
        found = detect.run_detection(series).regressions
    newest = len(series[0].commits) - 1
    return len({r.params for r in found if r.bad_position == newest})


def edge_alarms(series: list[detect.Series], variant: str) -> tuple[int, int]:
    """Reported edge regressions (newest, oldest) on no-change series."""
    with screened_as(variant):
        found = detect.run_detection(series).regressions
    return (sum(r.edge == "newest" for r in found), sum(r.edge == "oldest" for r in found))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, nargs="+", default=[4, 5, 6, 7])
    parser.add_argument("--offsets", type=float, nargs="+", default=[0.03, 0.06])
    parser.add_argument("--noise", type=float, default=0.03, help="log-sd within a commit")
    parser.add_argument("--step", type=float, default=1.3, help="the newest commit's ratio")
    parser.add_argument("--flat", type=int, default=500, help="no-change series a case")
    parser.add_argument("--steps", type=int, default=200, help="step series a case")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if min(args.commits) < changepoints.EDGE_MIN_COMMITS:
        parser.error(f"--commits: edges are tested from {changepoints.EDGE_MIN_COMMITS} on")
    totals = {v: [0, 0, 0] for v in VARIANTS}
    print(f"{'commits':>7} {'offset':>6} {'variant':>7}  step found (of {args.steps})  "
          f"false edge alarms (of {args.flat}): newest, oldest")
    for case, (commits, offset) in enumerate((c, o) for c in args.commits for o in args.offsets):
        seed = args.seed + 1000 * case
        common = {"commits": commits, "offset": offset, "noise": args.noise}
        steps = short_series(args.steps, step=args.step, seed=seed, **common)
        flat = short_series(args.flat, step=1.0, seed=seed + 500, **common)
        for variant in VARIANTS:
            found = newest_found(steps, variant)
            newest, oldest = edge_alarms(flat, variant)
            for i, n in enumerate((found, newest, oldest)):
                totals[variant][i] += n
            print(f"{commits:>7} {offset:>6.0%} {variant:>7}  {found:>4}  {newest:>4} {oldest:>4}")
    cases = len(args.commits) * len(args.offsets)
    for variant in VARIANTS:
        found, newest, oldest = totals[variant]
        print(f"{variant}: step found {found} of {args.steps * cases}; false edge alarms in "
              f"{args.flat * cases} no-change series: {newest} newest, {oldest} oldest, "
              f"{newest + oldest} at both ends")


if __name__ == "__main__":
    main()
