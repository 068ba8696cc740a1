"""Detection quality on the step panel (regressions.groundtruth.synthetic), through `run_detection`.

One detection run over N step series (+4% at commit 37, +1.5% at 50) and N no-change series,
with the FDR control spanning all 2N series as `spyre-regress detect` applies it to a run;
then the same run with re-measurement (regressions.detection.remeasure) within a budget,
served by the panel's own generator. Then the A/A check, with and without re-measurement: M
no-change series in one run must give no alert.

    python scripts/detection_quality.py            # the documented figures (N=50, M=200)
    python scripts/detection_quality.py --series 500 --seed 10000 --aa 1000   # held out
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from regressions.detection import detect, remeasure
from regressions.detection.alerts import cluster_alerts
from regressions.groundtruth import synthetic

STEP, FLAT = "execute.Panel.time_step", "execute.Panel.time_flat"


def panel_series(name: str, panel: list, seed: int) -> list[detect.Series]:
    commits = tuple(f"{c:040x}" for c in range(synthetic.PANEL_COMMITS))
    return [
        detect.Series(machine="panel", env="synthetic", benchmark=name, params=f"({seed + i})",
                      commits=commits,
                      positions=tuple(range(len(commits))),
                      samples=tuple(tuple(s) for s in samples))
        for i, (samples, _) in enumerate(panel)
    ]


def found_changes(regressions: list[detect.Regression]) -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for r in regressions:
        found.setdefault((r.benchmark, r.params), []).append(r.bad_position)
    return found


def localisation_ceiling(reps: int, seed: int) -> tuple[float, float]:
    """Share of +1.5% steps an oracle places within one commit of commit 50.

    The oracle knows there is exactly one change in commits [37, 60) (the 4% step found
    exactly) and the noise. Returns the score of the maximum-likelihood split (what
    `detect` reports) and of the Bayes estimate for this score (the centre of the 3-commit
    window with the most posterior mass, flat prior), which trades the most likely commit
    for a better +-1 score.
    """
    (first, _), (index, size) = synthetic.PANEL_STEPS
    n, at = synthetic.PANEL_COMMITS - first, index - first
    sigma = synthetic.PANEL_NOISE / math.sqrt(synthetic.PANEL_SAMPLES)
    means = np.random.default_rng(seed).normal(0.0, sigma, (reps, n))
    means[:, at:] += math.log1p(size)
    total = np.cumsum(means, axis=1)
    k = np.arange(detect.MIN_SIZE, n - detect.MIN_SIZE + 1)
    # Log-likelihood of a split at k, up to a constant: the between-segment sum of squares.
    loglik = (total[:, k - 1] ** 2 / k + (total[:, -1:] - total[:, k - 1]) ** 2 / (n - k)) / (
        2 * sigma**2)
    mass = np.exp(loglik - loglik.max(axis=1, keepdims=True))
    window = mass.copy()
    window[:, 1:] += mass[:, :-1]
    window[:, :-1] += mass[:, 1:]
    exact, near = (float(np.mean(np.abs(k[np.argmax(score, axis=1)] - at) <= 1))
                   for score in (loglik, window))
    return exact, near


def panel_run(n: int, seed: int, *, remeasure_budget: float | None, alpha: float,
              fdr: float) -> dict:
    """One detection run over n step + n no-change series; with a budget (a fraction of the
    base samples), re-measurement served by the panel's own generator first."""
    step_seed, flat_seed = seed, seed + 100_000
    series = (panel_series(STEP, synthetic.step_panel(n, seed=step_seed), step_seed)
              + panel_series(FLAT, synthetic.step_panel(n, seed=flat_seed, steps=()), flat_seed))
    base = sum(len(p) for s in series for p in s.samples if p is not None)
    start = time.perf_counter()
    spent: float
    if remeasure_budget is None:
        detection, spent = detect.run_detection(series, alpha=alpha, fdr=fdr), 0
    else:
        truth = {s.params: synthetic.PANEL_STEPS if s.benchmark == STEP else () for s in series}
        result = remeasure.detect_with_remeasurement(
            series, list(series[0].commits), synthetic.StepRemeasure(truth, seed=seed + 300_000),
            budget=remeasure.budget_for(base, remeasure_budget), alpha=alpha, fdr=fdr)
        detection, spent = result.detection, result.spent
    elapsed = time.perf_counter() - start
    found = found_changes(detection.regressions)
    step_found = [found.get((STEP, s.params), []) for s in series[:n]]
    recall = {(index, margin): sum(any(abs(f - index) <= margin for f in fs)
                                   for fs in step_found) / n
              for index, _ in synthetic.PANEL_STEPS for margin in (1, 2)}
    precision = sum(synthetic.precision_recall([i for i, _ in synthetic.PANEL_STEPS], fs, 1)[0]
                    for fs in step_found) / n
    flat = sum(bool(found.get((FLAT, s.params))) for s in series[n:]) / n
    return {"recall": recall, "precision": precision, "flat_alarms": flat, "extra": spent / base,
            "ms_per_series": elapsed / (2 * n) * 1000}


def aa_run(m: int, seed: int, *, remeasure_budget: float | None, alpha: float,
           fdr: float) -> int:
    """Alerts in one run of m no-change series (with re-measurement when a budget is given)."""
    aa = panel_series(FLAT, synthetic.step_panel(m, seed=seed, steps=()), seed)
    if remeasure_budget is None:
        found = detect.run_detection(aa, alpha=alpha, fdr=fdr).regressions
    else:
        base = sum(len(p) for s in aa for p in s.samples if p is not None)
        found = remeasure.detect_with_remeasurement(
            aa, list(aa[0].commits), synthetic.StepRemeasure({s.params: () for s in aa},
                                                             seed=seed + 300_000),
            budget=remeasure.budget_for(base, remeasure_budget), alpha=alpha,
            fdr=fdr).detection.regressions
    return len(cluster_alerts(found))


def report(label: str, n: int, seed: int, run: dict) -> None:
    print(f"{label}: {n} step series (seeds {seed}..{seed + n - 1}) + {n} no-change "
          f"series (seeds {seed + 100_000}..{seed + 100_000 + n - 1}), one run, "
          f"{run['ms_per_series']:.1f} ms/series")
    for index, size in synthetic.PANEL_STEPS:
        print(f"  recall, +{size:.1%} step at commit {index} (+-1 commit): "
              f"{run['recall'][index, 1]:.2f}   (+-2: {run['recall'][index, 2]:.2f})")
    print(f"  precision of step-series detections (+-1): {run['precision']:.2f}")
    print(f"  no-change series with any false alarm: {run['flat_alarms']:.1%}")
    if run["extra"]:
        print(f"  extra samples: {run['extra']:.1%} of the base samples")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=50, help="step and no-change series each")
    parser.add_argument("--aa", type=int, default=200, help="no-change series in the A/A run")
    parser.add_argument("--seed", type=int, default=0, help="first seed of the step panel")
    parser.add_argument("--alpha", type=float, default=detect.ALPHA,
                        help="per-change p ceiling (default %(default)s)")
    parser.add_argument("--fdr", type=float, default=detect.FDR,
                        help="false discovery rate (default %(default)s)")
    parser.add_argument("--budget", type=float, default=remeasure.BUDGET_FRACTION,
                        help="re-measurement budget, fraction of the base samples "
                             "(default %(default)s)")
    args = parser.parse_args()
    n, options = args.series, {"alpha": args.alpha, "fdr": args.fdr}
    report("panel, detection only", n, args.seed,
           panel_run(n, args.seed, remeasure_budget=None, **options))
    report(f"panel, re-measurement within {args.budget:.0%}", n, args.seed,
           panel_run(n, args.seed, remeasure_budget=args.budget, **options))
    mle, bayes = localisation_ceiling(100_000, args.seed)
    print(f"oracle localisation of the +{synthetic.PANEL_STEPS[1][1]:.1%} step at 10 samples "
          f"(+-1 commit, 100000 draws): {mle:.2f} maximum likelihood, {bayes:.2f} Bayes +-1 "
          "window")
    aa_seed = args.seed + 200_000
    for label, budget in (("detection only", None), ("with re-measurement", args.budget)):
        alerts = aa_run(args.aa, aa_seed, remeasure_budget=budget, **options)
        print(f"A/A, {label}: {args.aa} no-change series (seeds {aa_seed}.."
              f"{aa_seed + args.aa - 1}) in one run: {alerts} alert(s)")


if __name__ == "__main__":
    main()
