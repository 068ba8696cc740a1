"""Time `spyre-regress detect` on a large synthetic asv results store (budget: 30 s, 300 MB).

Writes an asv results directory (format version 2) of `--benchmarks` x `--params` series over
`--commits` commits: 3% lognormal noise, a +5% step at a random commit in 2% of the series,
and `--runner-changes` commits where the machine changes under the suite (80% of the series
move by one factor, +-1% per series, as a GitHub-hosted runner's hardware change moves them).
With `--samples 0` each point is one value with asv's statistics, as `asv run` keeps it
without `--record-samples` (the layout of public stores benchmarked on hosted runners);
otherwise each point records that many samples. Then it runs the installed
`spyre-regress detect` as a user does (a fresh process: imports, loading, detection,
clustering, JSON) and scores what it found.

    python scripts/bench_detect.py --out /tmp/store           # 50 x 10 series x 1700 commits
    python scripts/bench_detect.py --out /tmp/store --reuse   # time again, store as written
    /usr/bin/time -v spyre-regress detect --results /tmp/store/results --json /tmp/a.json

Time and memory are best read with /usr/bin/time -v around the last command (the figures in
docs/detection.md were taken so).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from regressions.groundtruth import synthetic

NOISE = 0.03
STEP = 0.05
RUNNER_SHARE = 0.8
RUNNER_FACTORS = (0.85, 1.25)  # a runner change: this much faster or slower, either way


def plan(n_series: int, n_commits: int, runner_changes: int, rng: np.random.Generator
         ) -> tuple[np.ndarray, dict[int, int], list[int]]:
    """Per series and commit the level; the step commit of each stepped series; the
    commits where the runner changed."""
    levels = np.ones((n_series, n_commits))
    steps = {}
    for s in range(n_series):
        if rng.random() < 0.02:
            steps[s] = int(rng.integers(10, n_commits - 10))
            levels[s, steps[s]:] *= 1 + STEP
    changes = sorted(int(c) for c in rng.choice(np.arange(20, n_commits - 20), runner_changes,
                                                replace=False))
    for commit in changes:
        factor = float(rng.uniform(*RUNNER_FACTORS))
        moved = rng.random(n_series) < RUNNER_SHARE
        jitter = np.exp(rng.normal(0, 0.01, n_series))
        levels[moved, commit:] *= (factor * jitter[moved])[:, None]
    return levels, steps, changes


def write_results(root: Path, n_benchmarks: int, n_params: int, n_commits: int, samples: int,
                  runner_changes: int, seed: int) -> dict:
    """The asv results directory; returns what was planted."""
    rng = np.random.default_rng(seed)
    n_series = n_benchmarks * n_params
    levels, steps, changes = plan(n_series, n_commits, runner_changes, rng)
    n = max(samples, 10)  # one recorded value is the median of a run of ten
    draws = levels[:, :, None] * np.exp(rng.normal(0, NOISE, (n_series, n_commits, n)))
    benchmarks = {}
    for b in range(n_benchmarks):
        block = draws[b * n_params:(b + 1) * n_params]
        benchmarks[f"bench_suite.Synthetic{b:03d}.time_run"] = synthetic.BenchmarkHistory(
            samples=[[block[p, c].tolist() for p in range(n_params)] for c in range(n_commits)],
            params=(tuple(str(p) for p in range(1, n_params + 1)),),
            record_samples=samples > 0)
    commits = [(f"{c:08x}" + "0" * 32, 1_700_000_000_000 + c * 86_400_000)
               for c in range(n_commits)]
    for path, doc in synthetic.asv_results_documents(commits, benchmarks).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(json.dumps(doc))
    names = list(benchmarks)
    stepped = {(names[s // n_params], f"({s % n_params + 1})"): c for s, c in steps.items()}
    return {"steps": [[*k, v] for k, v in stepped.items()], "runner_changes": changes}


def score(alerts_file: Path, planted: dict) -> str:
    document = json.loads(alerts_file.read_text())
    steps = {(b, p): c for b, p, c in planted["steps"]}
    members = [m for a in document["alerts"] for m in a["members"]]
    true = sum(abs(m["bad_position"] - steps.get((m["benchmark"], m["params"]), -9)) <= 1
               for m in members)
    found = sorted(e["bad_position"] for e in document["environment"])
    return (f"{len(document['alerts'])} alert(s), {len(members)} regression(s): {true} at a "
            f"planted step (+-1 commit), {len(members) - true} not; environment alerts at "
            f"{found} (runner changed at {planted['runner_changes']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the store")
    parser.add_argument("--benchmarks", type=int, default=50)
    parser.add_argument("--params", type=int, default=10, help="series per benchmark")
    parser.add_argument("--commits", type=int, default=1700)
    parser.add_argument("--samples", type=int, default=0, help="0: one value per point")
    parser.add_argument("--runner-changes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reuse", action="store_true", help="time the store already there")
    args = parser.parse_args()

    root, truth = args.out / "results", args.out / "planted.json"
    if not args.reuse:
        start = time.perf_counter()
        planted = write_results(root, args.benchmarks, args.params, args.commits,
                                samples=args.samples,
                                runner_changes=args.runner_changes, seed=args.seed)
        truth.write_text(json.dumps(planted))
        size = sum(f.stat().st_size for f in root.rglob("*.json")) / 1e6
        print(f"wrote {args.benchmarks * args.params} series x {args.commits} commits "
              f"({len(planted['steps'])} with a +5% step, runner changes at "
              f"{planted['runner_changes']}), {size:.0f} MB of asv JSON, in "
              f"{time.perf_counter() - start:.1f} s")
    script = Path(sys.executable).with_name("spyre-regress")
    start = time.perf_counter()
    done = subprocess.run([str(script), "detect", "--results", str(root), "--json",
                           str(args.out / "alerts.json")], capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"spyre-regress detect failed (exit {done.returncode}): {done.stderr[-2000:]}")
    print(f"spyre-regress detect (fresh process, exit {done.returncode}): {wall:.1f} s; "
          f"{score(args.out / 'alerts.json', json.loads(truth.read_text()))}")


if __name__ == "__main__":
    main()
