"""A short step awaiting more commits: a store cut around a step, read with detect --table.

A store's series cut to a few commits before a step and 2, 3, 4 ... from it on, each cut
read with `spyre-regress detect --table` as a user does.

The table "A short step, awaiting more commits" of docs/measurements/detection.md: PyBaMM
#4020 in pybamm-bench's store (https://github.com/pybamm-team/pybamm-bench), its py3.12
environment, 5 commits before the step at 90c1c357 and 2, 3 or 4 from it on. Each cut is
written as long rows (`regressions.records.tables.long_table`, the layout
scripts/asv_to_table.py writes) into a temporary folder, and the installed `spyre-regress
detect --table FILE.csv --json ...` (a fresh process) reads it. Per cut it prints the alert
whose bad commit is the step's (its status, good commit and members) and the other open
alerts (their bad commit, members and ratios). The defaults are PyBaMM #4020's commits, in
history order; `--commits`, `--step` and `--env` take another store's.

    python scripts/short_step_cuts.py --results STORE/results --machine GitHubRunner
    python scripts/short_step_cuts.py --results STORE/results --machine NAME \\
        --env virtualenv-py3.11 --commits C1,C2,...,CN --step C6 --after 2,3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from regressions.records import tables
from regressions.records.results_store import ResultsStore

# pybamm-bench's commits around PyBaMM #4020, oldest first: 5 before the step, 4 from it on
PYBAMM_4020 = ("4cf09f36", "09ee982b", "6b5f5b7f", "cf09d5e3", "51c41208",
               "90c1c357", "c0ff64f2", "4189099e", "44d946f4")
PYBAMM_STEP = "90c1c357"


def cut(table: pd.DataFrame, commits: tuple[str, ...]) -> pd.DataFrame:
    """The rows of `commits` (hash prefixes) only."""
    short = table["commit"].astype(str)
    return table[short.map(lambda c: any(c.startswith(p) for p in commits))]


def describe(document: dict, step: str) -> list[str]:
    """The step's alert, then the other open alerts, one line each."""
    lines = []
    for alert in document["alerts"]:
        members = alert["members"]
        at_step = alert["bad_commit"].startswith(step)
        if not at_step and alert.get("status") != "open":
            continue
        ratios = sorted(m["ratio"] for m in members)
        spread = f"x{ratios[0]:.3g}" if len(ratios) == 1 else f"x{ratios[0]:.3g}-{ratios[-1]:.3g}"
        where = "the step" if at_step else "other"
        lines.append(f"  {where}: {alert.get('status')} {alert['kind']} alert, good "
                     f"{alert['good_commit'][:8]} -> bad {alert['bad_commit'][:8]}, "
                     f"{len(members)} member(s), {spread}")
    return sorted(lines, key=lambda line: not line.startswith("  the step"))


def detect_table(path: Path) -> tuple[int, dict]:
    """`spyre-regress detect --table` on `path` in a fresh process: its exit and its JSON."""
    script = Path(sys.executable).with_name("spyre-regress")
    out = path.with_suffix(".json")
    done = subprocess.run([str(script), "detect", "--table", str(path), "--json", str(out)],
                          capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"spyre-regress detect failed on {path.name} (exit {done.returncode}): "
                 f"{done.stderr[-2000:]}")
    return done.returncode, json.loads(out.read_text())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True, help="an asv results folder")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--env", default="virtualenv-py3.12",
                        help="keep the environments whose name starts with this")
    parser.add_argument("--commits", default=",".join(PYBAMM_4020),
                        help="hash prefixes in history order (default: PyBaMM #4020's)")
    parser.add_argument("--step", default=PYBAMM_STEP, help="the step's first commit")
    parser.add_argument("--after", default="2,3,4",
                        help="how many commits from the step on each cut keeps")
    args = parser.parse_args(argv)
    commits = tuple(args.commits.split(","))
    if args.step not in commits:
        parser.error(f"--step {args.step} is not one of --commits")
    if not args.results.is_dir():
        parser.error(f"--results {args.results}: no such folder")
    before = commits.index(args.step)
    frame = ResultsStore(args.results, args.machine).frame()
    frame = frame[frame["env"].astype(str).str.startswith(args.env)]
    if frame.empty:
        sys.exit(f"no results of machine {args.machine} in an environment {args.env}*")
    table = tables.long_table(frame)
    with tempfile.TemporaryDirectory() as folder:
        for after in (int(n) for n in args.after.split(",")):
            kept = commits[:before + after]
            rows = cut(table, kept)
            path = Path(folder) / f"cut_{before}+{after}.csv"
            rows.to_csv(path, index=False)
            exit_code, document = detect_table(path)
            print(f"{before} + {after} commits ({rows['commit'].nunique()} with results, "
                  f"newest {kept[-1]}): exit {exit_code}")
            print("\n".join(describe(document, args.step)) or "  no alert")


if __name__ == "__main__":
    main()
