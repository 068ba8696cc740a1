"""Apache Otava and ruptures scored on the step panel, as detection_quality.py scores ours.

Two other change-point detectors on the step panel's detection-only series, as
scripts/detection_quality.py scores this project's detector.

The comparison of docs/measurements/detection.md "The step panel" ("the two other
detectors"). The panel (regressions.groundtruth.synthetic: 60 commits x 10 samples, 3%
lognormal noise, +4% at commit 37, +1.5% at commit 50): `--series` step series seeded
0, 1, ... and as many no-change series seeded 100000, ...; each detector reads one series at
a time, as per-commit means (Otava and ruptures take one value a point):

- Apache Otava (https://github.com/apache/otava, `otava.analysis.compute_change_points`:
  E-Divisive means with a t-test) at its defaults, window 50 and p <= 0.001;
- ruptures (https://github.com/deepcharles/ruptures, `Pelt(model="l2", min_size=2, jump=1)`:
  every commit a candidate, where ruptures' default jump of 5 lets a change fall only on
  every fifth commit, never within one commit of 37) with the penalty 2 sigma^2 ln n, sigma^2
  the variance of a commit's mean from the within-commit replicates (their pooled variance
  over the samples a commit).

A hit is a change point within +-1 commit of a step (the first commit of the new level);
printed per detector: the share of step series with a hit at each step, and the share of
no-change series with any change point. Neither package is a dependency of this project:
install them beside it (`pip install ruptures==1.1.10`; `pip install --no-deps --target
DIR apache-otava==0.8.0` and `PYTHONPATH=DIR`: its analysis needs only numpy and scipy, while
its requirements pin older numpy and scipy and pull in its database and Slack clients; the
versions of the documented figures); a missing one is skipped with a line that says so.

    python scripts/other_detectors.py                  # the documented panel (50 + 50)
    python scripts/other_detectors.py --series 5 --detectors ruptures
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from collections.abc import Callable, Sequence

import numpy as np

from regressions.groundtruth import synthetic

Panel = list[tuple[list[list[float]], list[int]]]


def commit_means(samples: Sequence[Sequence[float]]) -> np.ndarray:
    return np.array([float(np.mean(s)) for s in samples])


def mean_variance(samples: Sequence[Sequence[float]]) -> float:
    """The variance of one commit's mean: the replicates' pooled variance over their count."""
    pooled = float(np.mean([np.var(s, ddof=1) for s in samples]))
    return pooled / float(np.median([len(s) for s in samples]))


def otava_changes(samples: Sequence[Sequence[float]]) -> list[int]:
    """Otava's change points (the index of each new level's first commit), at its defaults."""
    from otava.analysis import compute_change_points

    found, _weak = compute_change_points(commit_means(samples).tolist(),  # a list: not an array
                                         window_len=50, max_pvalue=0.001)
    return sorted(int(c.index) for c in found)


def ruptures_changes(samples: Sequence[Sequence[float]]) -> list[int]:
    """ruptures' Pelt (l2) change points, penalty 2 sigma^2 ln n."""
    import ruptures

    means = commit_means(samples)
    penalty = 2 * mean_variance(samples) * math.log(means.size)
    ends = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(means).predict(pen=penalty)
    return [int(e) for e in ends[:-1]]  # the last end is the series' length


DETECTORS: dict[str, tuple[str, Callable[[Sequence[Sequence[float]]], list[int]]]] = {
    "otava": ("otava", otava_changes),
    "ruptures": ("ruptures", ruptures_changes),
}


def score(detector: Callable[[Sequence[Sequence[float]]], list[int]], steps: Panel,
          flat: Panel) -> tuple[dict[int, float], float]:
    """Share of step series with a change within +-1 commit of each step; share of
    no-change series with any change."""
    found = [detector(samples) for samples, _ in steps]
    recall = {index: sum(any(abs(f - index) <= 1 for f in fs) for fs in found) / len(steps)
              for index, _ in synthetic.PANEL_STEPS}
    alarms = sum(bool(detector(samples)) for samples, _ in flat) / len(flat)
    return recall, alarms


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=50, help="step and no-change series each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--detectors", nargs="+", choices=sorted(DETECTORS),
                        default=sorted(DETECTORS))
    args = parser.parse_args(argv)
    steps = synthetic.step_panel(args.series, seed=args.seed)
    flat = synthetic.step_panel(args.series, seed=args.seed + 100_000, steps=())
    print(f"panel: {args.series} step series (seeds {args.seed}..{args.seed + args.series - 1})"
          f" + {args.series} no-change series (seeds {args.seed + 100_000}.."
          f"{args.seed + 100_000 + args.series - 1}), per-commit means")
    for name in args.detectors:
        module, detector = DETECTORS[name]
        if importlib.util.find_spec(module) is None:
            print(f"{name}: not installed (pip install apache-otava==0.8.0 ruptures==1.1.10 "
                  "into a scratch environment); skipped")
            continue
        recall, alarms = score(detector, steps, flat)
        hits = ", ".join(f"+{size:.1%} step at commit {index} (+-1 commit): {recall[index]:.2f}"
                         for index, size in synthetic.PANEL_STEPS)
        print(f"{name}: recall {hits}; no-change series with any false alarm: {alarms:.0%}")


if __name__ == "__main__":
    main()
