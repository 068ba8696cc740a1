"""Time `spyre-regress detect` on 2,000 series x 100 commits of asv results (budget: 30 s).

Writes a synthetic asv results directory (format version 2, 10 samples per point, 3%
lognormal noise, a +5% step at a random commit in 2% of the series) to a temporary
directory, then times the CLI as a user runs it (a fresh process: imports, loading, detection,
clustering, JSON) and, in this process, each step on its own.

    python scripts/bench_detect.py                    # 200 benchmarks x 10 params x 100 commits
    python scripts/bench_detect.py --benchmarks 20    # a quick run
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from regressions.detection import detect
from regressions.detection.alerts import cluster_alerts
from regressions.groundtruth import synthetic
from regressions.records import results

PARAMS = 10


def write_results(root: Path, n_benchmarks: int, n_commits: int,
                  seed: int) -> dict[tuple[str, str], int]:
    """The asv results directory; returns the injected step index of each stepped series."""
    rng = np.random.default_rng(seed)
    benchmarks = {}
    truth = {}
    for b in range(n_benchmarks):
        name = f"bench_execute.Synthetic{b:03d}.time_run"
        cells_by_param = []
        for param in range(1, PARAMS + 1):
            steps = ()
            if rng.random() < 0.02:
                steps = ((int(rng.integers(10, n_commits - 10)), 0.05),)
                truth[name, f"({param})"] = steps[0][0]
            samples, _ = synthetic.step_series(seed=int(rng.integers(2**31)),
                                               n_commits=n_commits, steps=steps)
            cells_by_param.append(samples)
        benchmarks[name] = synthetic.BenchmarkHistory(
            samples=[[cells[c] for cells in cells_by_param] for c in range(n_commits)],
            params=(tuple(str(p) for p in range(1, PARAMS + 1)),),
        )
    commits = [(f"{c:08x}" + "0" * 32, 1_700_000_000_000 + c * 86_400_000)
               for c in range(n_commits)]
    for path, doc in synthetic.asv_results_documents(commits, benchmarks).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(json.dumps(doc))
    return truth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", type=int, default=200, help="x 10 params = series")
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results"
        start = time.perf_counter()
        truth = write_results(root, args.benchmarks, args.commits, args.seed)
        size = sum(f.stat().st_size for f in root.rglob("*.json")) / 1e6
        print(f"wrote {args.benchmarks * PARAMS} series x {args.commits} commits "
              f"({len(truth)} with a +5% step), {size:.0f} MB of asv JSON, "
              f"in {time.perf_counter() - start:.1f} s")

        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "spyre_regress.cli", "detect", "--results",
                               str(root), "--json", str(Path(tmp) / "alerts.json")],
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        alerts = json.loads((Path(tmp) / "alerts.json").read_text())["alerts"]
        members = [m for a in alerts for m in a["members"]]
        true = sum(abs(bad - truth.get((m["benchmark"], m["params"]), -9)) <= 1
                   for a in alerts for m in a["members"]
                   for bad in [int(a["bad_commit"][:8], 16)])
        print(f"spyre-regress detect (fresh process, exit {done.returncode}): {wall:.1f} s, "
              f"{len(alerts)} alert(s), {len(members)} regression(s): {true} at an injected "
              f"step (+-1 commit), {len(members) - true} false")

        t0 = time.perf_counter()
        frame = results.load_results(root)
        t1 = time.perf_counter()
        series = results.series_from_frame(frame)
        t2 = time.perf_counter()
        found = detect.find_regressions(series)
        t3 = time.perf_counter()
        cluster_alerts(found)
        t4 = time.perf_counter()
        print(f"  in-process: load_results {t1 - t0:.1f} s, series_from_frame {t2 - t1:.1f} s, "
              f"find_regressions {t3 - t2:.1f} s, cluster_alerts {t4 - t3:.2f} s")


if __name__ == "__main__":
    main()
