"""A month of nightlies on a synthetic busy branch, scored against what was planted.

Each seed builds a branch (regressions.groundtruth.planted) and runs every night through
the nightly's own night, `regressions.night.run_night` (regressions.groundtruth.simulation
supplies the generator, memory and the bisection on the generator), then scores the
reports: recall and latency per planted regression, false reports per month, alerts that
blame an outlier's commit, and re-measurement spent against its budget.

    python scripts/month_simulation.py                      # both configurations, 20 seeds
    python scripts/month_simulation.py --config training --seeds 3 --jobs 2
"""

from __future__ import annotations

import argparse
import math
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor

from regressions.groundtruth import planted, simulation

CONFIGS = {"training": planted.TRAINING, "held-out": planted.HELD_OUT}


def run_seed(job: tuple[str, int]) -> simulation.Score:
    name, seed = job
    return simulation.score(simulation.simulate(planted.build_branch(CONFIGS[name], seed)))


def share(hits: int, total: int) -> str:
    return f"{hits}/{total} ({hits / total:.0%})" if total else "-"


def size_text(size: float) -> str:
    return "fails" if math.isinf(size) else f"+{size:.1%}" if size < 0.5 else f"x{1 + size:.1f}"


def print_table(scores: list[simulation.Score]) -> None:
    rows: dict[str, list[simulation.Planted]] = defaultdict(list)
    for s in scores:
        for p in s.planted:
            rows[p.label].append(p)
    print(f"  {'planted regression':28} {'kind':10} {'size':>6}  {'same night':>11} "
          f"{'<= 1 night':>11} {'reported':>11}  mean latency")
    for label, found in sorted(rows.items(), key=lambda item: item[1][0].size):
        n = len(found)
        latencies = [p.latency for p in found if p.latency is not None]
        mean = f"{sum(latencies) / len(latencies):.2f}" if latencies else "-"
        print(f"  {label:28} {found[0].symptom:10} {size_text(found[0].size):>6}  "
              f"{share(sum(p.latency == 0 for p in found), n):>11} "
              f"{share(sum(p.latency is not None and p.latency <= 1 for p in found), n):>11} "
              f"{share(len(latencies), n):>11}  {mean}")


def print_summary(scores: list[simulation.Score]) -> None:
    every = [p for s in scores for p in s.planted]
    five = [p for p in every if p.size >= 0.05]
    three = [p for p in every if p.size >= 0.03]
    months = sum(s.nights for s in scores) / 30
    false = [f for s in scores for f in s.false_reports]
    print(f"  >= 5% regressions reported the night they land: "
          f"{share(sum(p.latency == 0 for p in five), len(five))}")
    print(f"  >= 3% regressions reported within one night: "
          f"{share(sum(p.latency is not None and p.latency <= 1 for p in three), len(three))}")
    print(f"  all planted regressions reported eventually: "
          f"{share(sum(p.reported is not None for p in every), len(every))}")
    print(f"  false reports: {len(false)} in {months:.0f} simulated months "
          f"({len(false) / months:.2f} per month)"
          + (f": {sorted({why for _, _, why in false})}" if false else ""))
    print(f"  reports on the slow drift's commits: {sum(s.drift_reports for s in scores)}")
    print(f"  alerts whose bad commit is a planted outlier's: "
          f"{sum(s.outlier_blames for s in scores)}")
    statuses: dict[str, int] = defaultdict(int)
    for s in scores:
        for status, count in s.statuses.items():
            statuses[status] += count
    print(f"  alert records per month: {sum(s.alerts for s in scores) / months:.1f} "
          f"({', '.join(f'{k} {v / months:.1f}' for k, v in sorted(statuses.items()))}); "
          f"provisional ones confirmed later: {sum(s.confirmed for s in scores) / months:.1f}")
    spent, budget = sum(s.spent for s in scores), sum(s.budget for s in scores)
    # the simulation prices every sample at one second (remeasure.Costs()): seconds = samples
    print(f"  re-measurement: {spent:.0f} samples of a {budget:.0f} budget ({spent / budget:.0%}); "
          f"{spent / sum(s.base_samples for s in scores):.1%} of the nightly samples; nights "
          f"over budget: {sum(s.over_budget_nights for s in scores)}")
    print(f"  investigation runs per night (bisection + confirmation): "
          f"{sum(s.investigation_runs for s in scores) / sum(s.nights for s in scores):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=[*CONFIGS, "both"], default="both")
    parser.add_argument("--seeds", type=int, default=20, help="seeds per configuration")
    parser.add_argument("--first-seed", type=int, default=None,
                        help="first seed (default: the configuration's own)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    args = parser.parse_args()
    names = list(CONFIGS) if args.config == "both" else [args.config]
    for name in names:
        config = CONFIGS[name]
        first = config.first_seed if args.first_seed is None else args.first_seed
        jobs = [(name, seed) for seed in range(first, first + args.seeds)]
        started = time.perf_counter()
        with ProcessPoolExecutor(args.jobs) as pool:
            scores = list(pool.map(run_seed, jobs))
        elapsed = time.perf_counter() - started
        branch = planted.build_branch(config, first)
        print(f"{name}: seeds {first}..{first + args.seeds - 1}, {config.nights} nights, "
              f"{len(branch.commits)} commits (seed {first}), {len(branch.suite)} series, "
              f"stride {config.stride}; {elapsed:.0f} s wall with {args.jobs} job(s)")
        print_table(scores)
        print_summary(scores)


if __name__ == "__main__":
    main()
