"""How the suite's host clocks spread within a process, between processes and over time.

The measurement behind what one host-clock sample is (benchmarks/clocks.py) and how many a
commit gets (benchmarks/prepare.py). It measures the suite's own clock benchmarks the way
asv does, without asv: this process imports the suite and warms it up, as asv's forkserver
does; for each row (benchmark and parameters) and each of `--windows` windows it forks one
benchmark process, which runs the row's setup (its warm-up included) and forks
`--processes` children, each timing its calls between runs of the reference workload. The
windows go round-robin over the rows, so two windows of a row are as far apart in time as
asv's rounds of two commits are, and windows are labelled A B B A B A A B ... as asv's
interleaved rounds are.

Per row, and per family (the median over its rows), with robust spreads (1.4826 x median
absolute deviation / median):

- within: how one child's raw call times spread (the median over children);
- between raw / between sample: how the children of one window spread, by their median raw
  call time and by their sample (`clocks.relative_seconds`);
- window raw / window sample: how far the windows' medians spread, over what independent
  children would give them (1: the windows are like independent draws; 3: the moment a
  window ran in triples its spread);
- gate: for each A/B pair of the same code (the rounds of an `asv continuous` with
  `--rounds` rounds a side), asv's own verdict at factor 1.1 on one sample per window (its
  first child's: a benchmark process hands asv one) (+ or - is a false row), and the
  smallest slowdown of B that asv would flag (`regressions.stats.asv_verdict` on B's samples
  scaled up), the median over pairs. It needs 2 x `--rounds` windows, the default.

    python scripts/clock_spread.py --processes 6 --json spread.json
    python scripts/clock_spread.py --bench "CompileStage.*sdsc" --windows 12
    python scripts/clock_spread.py --report spread.json        # the table again, no measuring
    python scripts/clock_spread.py --waits --bench Compile --windows 14

`--waits`: the parts of a compile's wall time instead (benchmarks/waits.py): per compile row,
each window's benchmark process forks one child that takes every part at once, as the
suite's part rows do (`clocks.sample_waits`); per row the median, 90th percentile and
largest of each part over the windows, against the floors the gate reads parts at
(`waits.FLOORS`). Then where this machine's stolen time goes: a CPU-bound loop pinned to one
CPU, in half-second regions, its blocked time beside the steal that CPU's line of /proc/stat
counted meanwhile (`--steal-seconds`, default 30).

`--warm-call`: the table "The warm call's sample" of docs/measurements/premerge-gate.md. Per
warm-call row (`ExecuteHostTime`) and window, one benchmark process forks `--processes`
children (default 4); each discards one call and times the next nine (`clocks.timed_calls`).
From the same calls, each child's sample taken three ways (`clocks.relative_seconds`): as the
suite took it before (one discarded call, then calls until MIN_SECONDS of them were timed),
with two discarded calls and the median of at least five (`WARM_CALL_DISCARDED`,
`WARM_CALL_MIN_CALLS`: the suite now), and with two discarded and the median of eight; per
row the coefficient of variation of the samples over every window's children.

    python scripts/clock_spread.py --warm-call --windows 8 --processes 4 \\
        --bench "ExecuteHostTime.*'(softmax|layernorm|mlp)', 128"
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import re
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# One thread, as asv.conf.json sets for the suite's processes, before numpy starts its pool.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from regressions.stats import asv_verdict  # noqa: E402

FAMILIES = {"CompileTotal": "compile total (CPU)", "CompileStage": "compile stage (CPU)",
            "ExecuteHostTime": "warm call (wall)"}
SLOWDOWNS = np.round(np.arange(1.0, 3.001, 0.01), 2)


def rows(pattern: str) -> list[tuple[str, type, tuple]]:
    """Every clock row of the suite whose name matches `pattern`: (name, class, params)."""
    from benchmarks import bench_compile, bench_execute

    found = []
    for module in (bench_compile, bench_execute):
        for cls_name in FAMILIES:
            cls = getattr(module, cls_name, None)
            if cls is None:
                continue
            method = next(m for m in vars(cls) if m.startswith("time_"))
            for params in itertools.product(*cls.params):
                name = f"{module.__name__.split('.')[-1]}.{cls_name}.{method}{params!r}"
                if re.search(pattern, name):
                    found.append((name, cls, params))
    return found


def benchmark_process(cls: type, params: tuple, processes: int) -> list[list[list[float]]]:
    """One benchmark process, as asv forks it: setup (and its warm-up), then `processes`
    children; per child its (call seconds, reference seconds) pairs."""
    from benchmarks import clocks

    def measure() -> list | None:
        benchmark = cls()
        try:
            benchmark.setup(*params)
        except NotImplementedError:  # a row the suite skips (too short to time, no API)
            return None
        benchmark.prepare_row()  # the program and the warm-up (a no-op once warm)
        return [clocks.in_child(lambda: clocks.timed_calls(
            benchmark.fresh, benchmark.call, benchmark.clock, benchmark.min_calls))
            for _ in range(processes)]

    return clocks.in_child(measure)


def measure(selected: list, windows: int, processes: int) -> dict:
    """Round-robin over the rows, `windows` times; every row's children per window."""
    from benchmarks import prepare

    prepare.warm_up_forkserver()
    measured: dict = {name: [] for name, _, _ in selected}
    started = time.monotonic()
    for window in range(windows):
        for name, cls, params in selected:
            if window and not measured[name]:
                continue  # skipped
            found = benchmark_process(cls, params, processes)
            if found is not None:
                measured[name].append(found)
        print(f"window {window + 1}/{windows}: {time.monotonic() - started:.0f} s, load "
              f"{os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    return measured


WARM_CALL_TIMED = 9  # calls a child times after its one discarded call


def warm_call_samples(pairs: list[list[float]], min_seconds: float) -> dict[str, float]:
    """One child's sample three ways, from its (call, reference) seconds after one discarded
    call: before (calls until `min_seconds` are timed), two discarded and the median of at
    least five (until `min_seconds` too, as `timed_calls` stops), two discarded and all
    eight."""
    from benchmarks import clocks

    def until_enough(calls: list, least: int) -> list:
        for n in range(1, len(calls) + 1):
            if n >= least and sum(took for took, _ in calls[:n]) >= min_seconds:
                return calls[:n]
        return calls

    timed = [(float(took), float(ref)) for took, ref in pairs]
    return {"before": clocks.relative_seconds(until_enough(timed, 1)),
            "median of 5": clocks.relative_seconds(until_enough(timed[1:],
                                                                clocks.WARM_CALL_MIN_CALLS)),
            "median of 8": clocks.relative_seconds(timed[1:])}


def coefficient_of_variation(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else math.nan


def warm_call_report(measured: dict, min_seconds: float) -> None:
    """Per row, the coefficient of variation of its children's samples, each way."""
    print("| warm call | before | 2 discarded, median of 5 | ... of 8 |\n|---|---|---|---|")
    for name, windows in measured.items():
        samples = [warm_call_samples(child, min_seconds)
                   for window in windows for child in window]
        if not samples:
            continue
        cells = [f"{coefficient_of_variation([s[way] for s in samples]):.3f}"
                 for way in ("before", "median of 5", "median of 8")]
        print(f"| {name} | " + " | ".join(cells) + f" |  ({len(samples)} samples)")


def in_windows(selected: list, windows: int, measure: Callable[[Any], Any]) -> dict:
    """Per row, one benchmark process per window (round-robin over the rows), in which
    `measure` takes the set-up benchmark; a row whose setup declines is left out."""
    from benchmarks import clocks, prepare

    prepare.warm_up_forkserver()
    measured: dict = {name: [] for name, _, _ in selected}
    started = time.monotonic()

    def one(cls: type, params: tuple) -> Any:
        benchmark = cls()
        try:
            benchmark.setup(*params)
        except NotImplementedError:
            return None
        benchmark.prepare_row()
        return measure(benchmark)

    for window in range(windows):
        for name, cls, params in selected:
            found = clocks.in_child(functools.partial(one, cls, params))
            if found is not None:
                measured[name].append(found)
        print(f"window {window + 1}/{windows}: {time.monotonic() - started:.0f} s, load "
              f"{os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    return measured


def warm_call_windows(selected: list, windows: int, processes: int) -> dict:
    """Per warm-call row and window, one benchmark process's children: each one's
    (call, reference) seconds of WARM_CALL_TIMED calls after one discarded call."""
    from benchmarks import clocks

    return in_windows(selected, windows, lambda benchmark: [clocks.in_child(
        lambda: clocks.timed_calls(benchmark.fresh, benchmark.call, benchmark.clock,
                                   WARM_CALL_TIMED, min_seconds=0.0, max_calls=WARM_CALL_TIMED,
                                   discarded=1)) for _ in range(processes)])


def wait_windows(selected: list, windows: int) -> dict[str, list[dict[str, float]]]:
    """Per row, one benchmark process per window (round-robin over the rows), each forking
    one child that takes every part of the row's call's wait (`clocks.sample_waits`)."""
    from benchmarks import clocks

    return in_windows(selected, windows, lambda benchmark: clocks.sample_waits(
        benchmark.fresh, benchmark.call, benchmark.clock, benchmark.min_calls,
        discarded=benchmark.discarded_calls))


def wait_report(measured: dict[str, list[dict[str, float]]]) -> None:
    from benchmarks import waits

    parts = ("blocked", "children_cpu", "run_queue", "wall")
    print("per window (one benchmark process's child), in ms: median / p90 / max; floors "
          + ", ".join(f"{p} {f * 1e3:g} ms" for p, f in waits.FLOORS.items() if f))
    print(f"  {'row':58s} " + " ".join(f"{p:>20s}" for p in parts))
    over = {p: 0 for p in parts}
    for name, found in measured.items():
        if not found:
            continue
        cells = []
        for part in parts:
            values = np.array([f[part] for f in found]) * 1e3
            over[part] += int((values >= waits.FLOORS.get(part, np.inf) * 1e3).sum())
            cells.append("{:>6.2f} {:>6.2f} {:>6.2f}".format(
                *np.percentile(values, [50, 90, 100])))
        print(f"  {name[:58]:58s} " + " ".join(f"{c:>20s}" for c in cells))
    total = sum(len(f) for f in measured.values())
    print(f"windows at or over the floor: blocked {over['blocked']} of {total}, children's "
          f"CPU {over['children_cpu']} of {total}")


def cpu_steal(cpu: int) -> float:
    """Seconds of steal /proc/stat has counted for CPU `cpu` (its 8th field, in ticks)."""
    with open("/proc/stat") as handle:
        for line in handle:
            if line.startswith(f"cpu{cpu} "):
                return int(line.split()[8]) / os.sysconf("SC_CLK_TCK")
    return float("nan")


def steal_in_blocked(seconds: float, region: float = 0.5) -> None:
    """A CPU-bound loop pinned to one CPU, measured in regions of `region` seconds: nothing
    in it waits, so its blocked time is time the CPU was taken away without the guest's
    scheduler seeing a wait, which on a virtual machine is steal."""
    from benchmarks import waits

    cpu = sorted(os.sched_getaffinity(0))[0]
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    blocked = steal = run_queue = cpu_time = 0.0
    regions = 0
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            before = cpu_steal(cpu)

            def spin() -> None:
                end = time.perf_counter() + region
                while time.perf_counter() < end:
                    pass

            _, wait = waits.measure(spin)
            steal += cpu_steal(cpu) - before
            blocked, run_queue, cpu_time = (blocked + wait.blocked, run_queue + wait.run_queue,
                                            cpu_time + wait.cpu)
            regions += 1
    finally:
        os.sched_setaffinity(0, saved)
    print(f"CPU-bound loop on cpu{cpu}, {regions} regions of {region} s: CPU {cpu_time:.3f} s, "
          f"run-queue wait {run_queue:.3f} s, blocked {blocked:.4f} s; steal counted on "
          f"cpu{cpu} meanwhile {steal:.2f} s (/proc/stat, {1 / os.sysconf('SC_CLK_TCK'):g} s "
          f"ticks); load {os.getloadavg()[0]:.2f}")


def reference_runs(runs: int = 3000) -> None:
    """The distribution of one reference run's duration, per clock the suite times with."""
    import torch

    from benchmarks import clocks

    torch.set_num_threads(1)
    for clock in (time.process_time, time.perf_counter):
        taken = []
        for _ in range(runs):
            start = clock()
            clocks.reference()
            taken.append(clock() - start)
        low, p5, middle = np.percentile(taken, [0, 5, 50]) * 1e3
        print(f"reference on {clock.__name__}: fastest {low:.3f} ms, 5th percentile {p5:.3f} "
              f"ms, median {middle:.3f} ms (REFERENCE_S = {clocks.REFERENCE_S * 1e3:.3f} ms)")


def robust_spread(values) -> float:
    values = np.asarray(values, dtype=float)
    middle = np.median(values)
    return float(1.4826 * np.median(np.abs(values - middle)) / middle)


def abba(windows: int) -> list[str]:
    """asv's interleaved order: round r runs A then B for odd r, B then A for even r."""
    return [side for r in range(windows // 2) for side in ("AB" if r % 2 == 0 else "BA")]


def smallest_flagged(before: list[float], after: list[float]) -> float | None:
    """The smallest slowdown of `after` (a grid step of 1%) that asv flags as worse."""
    return next((float(s) for s in SLOWDOWNS if asv_verdict(before, [v * s for v in after]) > 0),
                None)


def row_figures(windows: list, rounds: int) -> dict:
    """The spreads and the simulated gate of one row (see the module docstring)."""
    from benchmarks import clocks

    raw = [np.array([statistics.median(t for t, _ in child) for child in window])
           for window in windows]
    sample = [np.array([clocks.relative_seconds(child) for child in window])
              for window in windows]
    spreads = [robust_spread([t for t, _ in child])
               for window in windows for child in window if len(child) > 2]
    within = statistics.median(spreads) if spreads else float("nan")  # one or two calls each

    def window_excess(per_window: list) -> float:
        logs = [np.log(w) for w in per_window]
        child_sd = float(np.sqrt(np.mean([np.var(w, ddof=1) for w in logs])))
        window_sd = float(np.std([np.median(w) for w in logs], ddof=1))
        independent = 1.2533 * child_sd / np.sqrt(len(logs[0]))
        return window_sd / independent if independent > 0 else float("nan")

    order = abba(len(windows))
    verdicts, smallest = [], []
    for start in range(0, len(windows) - 2 * rounds + 1, 2 * rounds):
        block = range(start, start + 2 * rounds)
        # one sample per window, as the suite's benchmark process hands asv one
        a = [sample[i][0] for i in block if order[i] == "A"]
        b = [sample[i][0] for i in block if order[i] == "B"]
        verdicts.append(asv_verdict(a, b))
        smallest.append(smallest_flagged(a, b))
    return {"median_s": float(np.median(np.concatenate(sample))), "within": within,
            "between_raw": statistics.median(robust_spread(w) for w in raw),
            "between_sample": statistics.median(robust_spread(w) for w in sample),
            "window_raw": window_excess(raw), "window_sample": window_excess(sample),
            "false_rows": sum(v != 0 for v in verdicts), "pairs": len(verdicts),
            "smallest": (statistics.median(s for s in smallest if s is not None)
                         if any(s is not None for s in smallest) else None)}


def report(measured: dict, rounds: int) -> None:
    figures = {name: row_figures(windows, rounds) for name, windows in measured.items()
               if windows}
    header = (f"{'row':58s} {'median':>9s} {'within':>6s} {'betw raw':>8s} {'betw smp':>8s} "
              f"{'win raw':>7s} {'win smp':>7s} {'false':>6s} {'flags at':>8s}")
    print(header)
    for name, f in figures.items():
        smallest = f"x{f['smallest']:.2f}" if f["smallest"] else "-"
        print(f"{name[:58]:58s} {f['median_s'] * 1e3:7.3f}ms {f['within']:6.1%} "
              f"{f['between_raw']:8.1%} {f['between_sample']:8.1%} {f['window_raw']:7.1f} "
              f"{f['window_sample']:7.1f} {f['false_rows']:>3d}/{f['pairs']:<2d} "
              f"{smallest:>8s}")
    print("\nper family (median over its rows; false rows summed):")
    for cls_name, family in FAMILIES.items():
        mine = [f for name, f in figures.items() if f".{cls_name}." in name]
        if not mine:
            continue
        flagged_at = [f["smallest"] for f in mine if f["smallest"]]
        print(f"  {family:22s} rows {len(mine):3d}  within {_median(mine, 'within'):6.1%}  "
              f"between raw {_median(mine, 'between_raw'):6.1%} sample "
              f"{_median(mine, 'between_sample'):6.1%}  window raw "
              f"{_median(mine, 'window_raw'):4.1f} sample {_median(mine, 'window_sample'):4.1f}"
              f"  false rows {sum(f['false_rows'] for f in mine)}/"
              f"{sum(f['pairs'] for f in mine)}  flags at x"
              f"{statistics.median(flagged_at) if flagged_at else float('nan'):.2f}")


def _median(figures: list, key: str) -> float:
    values = [f[key] for f in figures if not np.isnan(f[key])]
    return statistics.median(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default=".", help="regex over the rows' names")
    parser.add_argument("--windows", type=int, default=None,
                        help="windows per row (default: two per round of the simulated gate)")
    parser.add_argument("--processes", type=int, default=None,
                        help="children per window (default: 2)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds a side in the simulated gate (default: CLOCK_ROUNDS)")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument("--report", type=Path, help="print the table of an earlier --json")
    parser.add_argument("--waits", action="store_true",
                        help="the parts of each compile row's wall time, and where steal "
                             "goes (see above)")
    parser.add_argument("--warm-call", action="store_true",
                        help="the warm call's sample taken three ways (see above)")
    parser.add_argument("--steal-seconds", type=float, default=30.0,
                        help="--waits: seconds of the pinned CPU-bound loop")
    parser.add_argument("--reference", action="store_true",
                        help="time the reference workload 3,000 times on both clocks: the "
                             "fastest run is what benchmarks/clocks.py's REFERENCE_S says")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from benchmarks import prepare

    rounds = args.rounds or prepare.CLOCK_ROUNDS
    if args.reference:
        reference_runs()
        return 0
    if args.report:
        document = json.loads(args.report.read_text())
        if "warm_call" in document:
            from benchmarks import clocks

            warm_call_report(document["warm_call"], clocks.MIN_SECONDS)
        else:
            report(document["rows"], rounds)
        return 0
    selected = rows(args.bench)
    if not selected:
        parser.error(f"no clock row matches {args.bench!r}")
    if args.warm_call:
        from benchmarks import clocks

        warm = [row for row in selected if ".ExecuteHostTime." in row[0]]
        if not warm:
            parser.error(f"no warm-call row (ExecuteHostTime) matches {args.bench!r}")
        found = warm_call_windows(warm, args.windows or 8, args.processes or 4)
        if args.json:
            args.json.write_text(json.dumps({"version": 1, "warm_call": found}))
        warm_call_report(found, clocks.MIN_SECONDS)
        return 0
    if args.waits:
        compiles = [row for row in selected if "Compile" in row[0]]
        if not compiles:
            parser.error(f"no compile row matches {args.bench!r}")
        found = wait_windows(compiles, args.windows or 2 * rounds)
        if args.json:
            args.json.write_text(json.dumps({"version": 1, "waits": found}))
        wait_report(found)
        steal_in_blocked(args.steal_seconds)
        return 0
    windows = args.windows or 2 * rounds
    if windows < 2 * rounds:
        parser.error(f"--windows {windows} cannot fill one simulated gate of {rounds} rounds "
                     f"a side: give at least {2 * rounds}, or fewer --rounds")
    measured = measure(selected, windows, args.processes or 2)
    if args.json:
        args.json.write_text(json.dumps({"version": 1, "rows": measured}))
    report(measured, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
