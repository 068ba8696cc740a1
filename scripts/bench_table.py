"""Time `spyre-regress detect --table` on a large seeded table of results (budget: 20 s, 500 MB).

Writes a long table (CSV or Parquet, by `--out`'s suffix) of `--series` x `--commits` points,
one value each: 3% log-normal noise, a x1.10 step at a random commit (away from the ends) in
`--share` of the series (`regressions.groundtruth.tables.long_rows`, seeded by `--seed`).
Then it runs the installed `spyre-regress detect --table` as a user does (a fresh process:
imports, reading, detection, clustering, JSON) and scores the alerts against the planted
steps.

    python scripts/bench_table.py --out /tmp/table.csv        # 1,000 x 500, 2% with a step
    /usr/bin/time -v spyre-regress detect --table /tmp/table.csv --json /tmp/a.json

Time and memory are best read with /usr/bin/time -v around the second command.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from regressions.groundtruth.tables import long_rows


def score(alerts: dict, planted: dict[str, int], commits: list[str]) -> str:
    members = [m for a in alerts["alerts"] for m in a["members"]]
    found = sum(m["benchmark"] in planted and
                abs(commits.index(m["bad_commit"]) - planted[m["benchmark"]]) <= 1
                for m in members)
    return (f"{len(alerts['alerts'])} alert(s), {len(members)} regression(s): {found} of "
            f"{len(planted)} planted steps found within one commit, {len(members) - found} "
            f"other(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="FILE.csv or FILE.parquet")
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--share", type=float, default=0.02, help="share of series stepped")
    parser.add_argument("--seed", type=int, default=46)
    args = parser.parse_args()

    args.out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    table, planted = long_rows(args.series, args.commits, share=args.share, seed=args.seed)
    if args.out.suffix.lower() == ".parquet":
        table.to_parquet(args.out, index=False)
    else:
        table.to_csv(args.out, index=False)
    commits = list(dict.fromkeys(table["commit"]))
    print(f"wrote {args.series} series x {args.commits} commits ({len(planted)} with a x1.10 "
          f"step, seed {args.seed}), {args.out.stat().st_size / 1e6:.0f} MB, in "
          f"{time.perf_counter() - start:.1f} s")
    alerts = args.out.with_suffix(".alerts.json")
    script = Path(sys.executable).with_name("spyre-regress")
    start = time.perf_counter()
    done = subprocess.run([str(script), "detect", "--table", str(args.out), "--json",
                           str(alerts)], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"spyre-regress detect failed (exit {done.returncode}): {done.stderr[-2000:]}")
    print(f"spyre-regress detect --table (fresh process, exit {done.returncode}): {wall:.1f} s; "
          f"{score(json.loads(alerts.read_text()), planted, commits)}")


if __name__ == "__main__":
    main()
