"""Synthetic commit histories for measuring the bisector (scripts/bisection_quality.py, tests).

A history is a list of per-commit levels with one step; measuring a commit draws a batch of
lognormal samples around its level, as the device-time benchmark does under the noise model.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from regressions.bisection.commits import Measurement


@dataclass
class SyntheticHistory:
    commits: list[str]
    culprit: str
    levels: dict[str, float]
    untestable: set[str]
    failing_from: int | None = None  # commits from this index on raise (a failure signal)

    def measure_factory(self, noise: float, batch: int, seed: int):
        rng = random.Random(seed)
        sigma = math.sqrt(math.log1p(noise * noise))
        calls = {"count": 0}

        def measure(commit: str) -> Measurement:
            calls["count"] += 1
            if commit in self.untestable:
                return Measurement(commit=commit, status="untestable", detail="import failed")
            index = self.commits.index(commit)
            if self.failing_from is not None and index >= self.failing_from:
                return Measurement(commit=commit, status="failed", detail="RuntimeError")
            level = self.levels[commit]
            samples = tuple(level * math.exp(rng.gauss(-sigma * sigma / 2, sigma))
                            for _ in range(batch))
            return Measurement(commit=commit, status="ok", samples=samples)

        return measure, calls


def step_history(n_commits: int, step_at: int, step: float, untestable: int = 0,
                 seed: int = 0) -> SyntheticHistory:
    """`n_commits` commits (good first, bad last), the level rising by `step` at `step_at`."""
    rng = random.Random(seed)
    commits = [f"{seed:04d}{i:036d}" for i in range(n_commits)]
    levels = {c: 1.0 * (1 + step if i >= step_at else 1.0) for i, c in enumerate(commits)}
    candidates = [c for i, c in enumerate(commits) if 0 < i < n_commits - 1 and i != step_at]
    skipped = set(rng.sample(candidates, untestable)) if untestable else set()
    return SyntheticHistory(commits, commits[step_at], levels, skipped)


def bisection_quality(trials: int, commits: int, step: float, noise: float,
                      untestable: int, probes: int = 1) -> dict:
    """Seeded trials of `bisect_commits` on step histories, `probes` commits measured at
    once: how often the culprit is right, how many commits and batches it measured, and in
    how many rounds (waves of measurements that could run at the same time)."""
    from regressions.bisection.commits import bisect_commits

    exact = bracketed = 0
    measured, batches, rounds = [], [], []
    for seed in range(trials):
        step_at = random.Random(seed).randrange(1, commits)
        history = step_history(commits, step_at, step, untestable, seed=seed)
        measure, calls = history.measure_factory(noise, 10, seed + 1)
        result = bisect_commits(history.commits, measure, probes=probes)
        exact += result.culprit == history.culprit
        # With an untestable commit right before the step no bisector can tell the two
        # apart; it must name both (git bisect: "the first bad commit could be any of").
        bracketed += result.culprit == history.culprit or (
            history.culprit in result.candidates and all(
                c == history.culprit or c in history.untestable for c in result.candidates))
        measured.append(result.commits_measured)
        batches.append(calls["count"])
        rounds.append(result.rounds)
    return {"trials": trials, "right": exact / trials, "bracketed": bracketed / trials,
            "mean_commits_measured": sum(measured) / trials, "max_commits_measured":
            max(measured), "mean_batches": sum(batches) / trials,
            "mean_rounds": sum(rounds) / trials, "max_rounds": max(rounds)}
