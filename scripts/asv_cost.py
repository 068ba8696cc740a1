"""Where the wall time of an asv run goes: seconds per phase and per benchmark family.

Runs asv (this interpreter's) with the given arguments, stamps every line of its output with
the seconds since the start, and then reads the results of the commits it ran (through the
results store, `ResultsStore`). Prints:

- environment and discovery: from the start to asv's first "For ... commit" line;
- per commit and round, the install (when the round's commit is not the one installed) and
  the suite's import in that round's new forkserver (torch, the lazily imported modules,
  the warm-up): from its "For ... commit" line to its "Benchmarking" line. asv ends a line
  when it starts the next one, so a line's stamp is when the step after it began;
- per family (bench_compile, bench_execute, ...): the `duration` asv records for each of its
  benchmarks that this run measured (`started_at` after the run began; the last round's; a
  time benchmark runs once per round, so the per-commit figure multiplies it by the rounds
  seen) and the family's `setup_cache` seconds (`durations` in the results file,
  "<setup_cache module:line>": the last that asv recorded at the commit);
- what remains: the gap to the whole run's wall time (asv's own bookkeeping and printing,
  and the error of taking the last round's duration for every round).

Any asv command: its `wall` line is the whole command's time, which is how the rows of
docs/measurements/asv-suite.md's "Measured times" (`asv setup`, a family's `asv continuous`,
`asv publish`) and torch-spyre.md's "A commit on the default grid" (`asv run` in the written
suite, `--results` its results folder) are timed.

    python scripts/asv_cost.py continuous main HEAD
    python scripts/asv_cost.py --log asv-continuous.log continuous --bench compile main HEAD
    python scripts/asv_cost.py setup
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from regressions.records.results_store import ResultsStore, rows

# asv prints "(round i/n)" only when it interleaves rounds (several commits); a run of one
# commit runs every round under its one header, and the duration it records sums them
FOR_COMMIT = re.compile(r"For \S+ commit ([0-9a-f]{8})(?:.*\(round (\d+)/(\d+)\))?")


def run_stamped(args: list[str], log: Path | None) -> tuple[list[tuple[float, str]], float, int]:
    """asv's output lines with their time stamps, the run's wall seconds and exit status."""
    started = time.monotonic()
    lines = []
    with subprocess.Popen([sys.executable, "-m", "asv", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as asv:
        sink = log.open("w") if log else None
        assert asv.stdout is not None  # piped
        for line in asv.stdout:
            stamp = time.monotonic() - started
            lines.append((stamp, line.rstrip("\n")))
            print(f"{stamp:8.1f} {line}", end="", flush=True)
            if sink:
                sink.write(f"{stamp:8.1f} {line}")
        if sink:
            sink.close()
    return lines, time.monotonic() - started, asv.returncode


def phases(lines: list[tuple[float, str]]
           ) -> tuple[float, list[tuple[str, int, float, float]], int]:
    """Seconds before the first commit; per (commit, round) the seconds of its install (0
    when none) and of its forkserver's suite import; the rounds."""
    first = next((t for t, line in lines if FOR_COMMIT.search(line)), 0.0)
    rounds_seen, current, rounds = [], None, 1
    for stamp, line in lines:
        found = FOR_COMMIT.search(line)
        if found:
            current = (found[1], int(found[2] or 1), stamp, stamp)
            rounds = max(rounds, int(found[3] or 1))
        elif current and "Building for" in line:
            current = (*current[:3], stamp)
        elif current and "Benchmarking" in line:
            commit, round_number, began, installed = current
            rounds_seen.append((commit, round_number, installed - began, stamp - installed))
            current = None
    return first, rounds_seen, rounds


def family_costs(results: Path, commits: set[str], rounds: int,
                 since_ms: float = 0.0) -> dict[str, dict[str, float]]:
    """Per family: benchmark seconds over all commits (a time benchmark's duration times the
    rounds it ran in, at most its own `rounds` attribute from benchmarks.json) and
    setup_cache seconds, from the results store's documents of `commits`; only the
    benchmarks started at or after `since_ms` (ms since the epoch): a results file also holds
    what earlier runs measured at the commit."""
    costs: dict[str, dict[str, float]] = defaultdict(lambda: {"benchmarks": 0.0,
                                                               "setup_cache": 0.0})
    if not commits or not results.is_dir():  # `asv setup`, `asv publish`: nothing measured
        return {}
    store = ResultsStore(results)
    own_rounds = {name: int(entry.get("rounds") or 1)
                  for name, entry in store.benchmarks().items()}
    for document in store.documents():
        if str(document.get("commit_hash", ""))[:8] not in commits:
            continue
        for name, cells in rows(document):
            family = name.split(".")[0]
            if (cells.get("started_at") or 0) < since_ms:
                continue
            duration = cells.get("duration") or 0.0
            timed = name.split(".")[-1].startswith("time_")
            ran = min(rounds, own_rounds.get(name, rounds)) if timed else 1
            costs[family]["benchmarks"] += duration * ran
        durations = document.get("durations")
        for key, seconds in (durations.items() if isinstance(durations, dict) else ()):
            found = re.match(r"<setup_cache (\w+):\d+>", key)
            if found:
                costs[found[1]]["setup_cache"] += seconds
    return dict(costs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, help="also write the stamped output here")
    parser.add_argument("--results", type=Path, default=Path(".asv/results"))
    parser.add_argument("asv_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    began_ms = time.time() * 1000 - 1000  # asv stores started_at in whole milliseconds
    lines, wall, status = run_stamped(args.asv_args, args.log)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    first, rounds_seen, rounds = phases(lines)
    commits = {commit for commit, _, _, _ in rounds_seen}
    costs = family_costs(args.results, commits, rounds, began_ms)
    print(f"\nwall {wall:.1f} s, exit {status}, {len(commits)} commits x {rounds} rounds; CPU "
          f"{used.ru_utime + used.ru_stime:.1f} s (asv and every process it started); load "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"  {'environment check + discovery':34} {first:7.1f} s")
    installed = [seconds for _, _, seconds, _ in rounds_seen if seconds > 0]
    imports = [seconds for _, _, _, seconds in rounds_seen]
    print(f"  {'build + install':34} {sum(installed):7.1f} s  ({len(installed)} installs)")
    print(f"  {'suite import, one per round':34} {sum(imports):7.1f} s  ({len(imports)} "
          "commit-rounds)")
    accounted = first + sum(installed) + sum(imports)
    for family, cost in sorted(costs.items()):
        print(f"  {family + ' setup_cache':34} {cost['setup_cache']:7.1f} s")
        print(f"  {family + ' benchmarks':34} {cost['benchmarks']:7.1f} s")
        accounted += cost["setup_cache"] + cost["benchmarks"]
    print(f"  {'the rest (start-ups, asv itself)':34} {wall - accounted:7.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
