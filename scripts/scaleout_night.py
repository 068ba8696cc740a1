"""One nightly run serially and on an executor, on the same scratch history: wall times and
whether they found and stored the same things.

Builds a scratch history of `--commits` commits with three planted regressions (device time,
compile time, numerics; regressions/groundtruth/scenarios.py), clones it twice (the same
commits) and runs the installed `spyre-regress nightly` on each clone (stride 1 unless
`--stride`): first
serially, then with `--workers N`, one after the other on this machine. Prints, and writes
to OUT/scaleout.json:

- wall time of each whole night, and their ratio;
- the families that may share a host: their seconds in the serial night (the durations asv
  recorded for their benchmarks and `setup_cache`, summed over commits: no asv start-up
  counted) against the wall time of the executor's phase that ran them (every unit's asv
  start-up and install counted);
- the alerts of both nights (status, culprit, first divergent stage, kind);
- the two results stores compared point by point: per family how far a point's value (its
  median) is from the serial store's (numerics must be equal; device time is drawn with
  fresh noise in every process, so its medians agree as two draws do), and every sample
  stored once (each store's samples less what its re-measurement says it added are the
  night's own, equal in both; no device-time sample repeated).

    python scripts/scaleout_night.py OUT --commits 12 --workers 2 --grid demo
    python scripts/scaleout_night.py OUT --again workers   # the executor's night once more
    python scripts/scaleout_night.py OUT --commits 24 --stride 6 --bench ExecuteDeviceTime

`--again workers` runs the executor's night again beside the serial one already in OUT, on a
clone of the serial night's history (a scratch history copies the sources it is built from,
so one built from a changed tree has other commits), for a change to the executor alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from regressions import metrics
from regressions.groundtruth import scratch
from regressions.records import alert_store
from regressions.records.results_store import ResultsStore

SCRIPT = Path(sys.executable).with_name("spyre-regress")
PLANTED = ("sdsc_fp16_accumulate", "quadratic_verify", "workdiv_m127")
MACHINE = "scaleout"


def plan(commits: int) -> list[str | None]:
    """`commits - 1` changes after the import, the planted ones spread over the history."""
    changes: list[str | None] = [None] * (commits - 1)
    for k, name in enumerate(PLANTED):
        changes[(k + 1) * len(changes) // (len(PLANTED) + 1)] = name
    return changes


def night(root: Path, repo: Path, extra: list[str], env: dict[str, str], stride: int = 1
          ) -> dict:
    """The installed nightly on `repo`, its state under `root`: wall time, exit code, and
    each bisection's seconds (from its "bisecting" line to the investigation's next step)."""
    started = time.monotonic()
    lines: list[tuple[float, str]] = []
    with (root / "nightly.log").open("w") as log, subprocess.Popen(
            [str(SCRIPT), "nightly", "--repo", str(repo), "--state", str(root / "state"),
             "--reports", str(root / "reports"), "--stride", str(stride), "--machine", MACHINE,
             *extra], env={**os.environ, **env}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True) as process:
        assert process.stdout is not None  # piped
        for line in process.stdout:
            lines.append((time.monotonic() - started, line.rstrip()))
            log.write(f"[{lines[-1][0]:8.1f}] {line}")
    done = {"seconds": time.monotonic() - started, "exit": process.returncode,
            "bisections": bisections(lines)}
    (root / "night.json").write_text(json.dumps(done, indent=1))
    return done


def bisections(lines: list[tuple[float, str]]) -> list[dict]:
    """Each bisection of the log: its kind and seconds (with its confirmation)."""
    found, kind = [], None
    for k, (at, line) in enumerate(lines):
        if "investigating" in line:
            kind = line.split("investigating ")[1].split()[0]
        if "bisecting" in line and k + 1 < len(lines):
            after = next((t for t, text in lines[k + 1:] if "capturing stages" in text
                          or text.lstrip().startswith("alert ")), lines[-1][0])
            found.append({"kind": kind, "line": line.strip(), "seconds": round(after - at, 1)})
    return found


def findings(state: Path) -> list[dict]:
    store = alert_store.AlertStore(state / "alerts.sqlite")
    try:
        extras = store.extras()
        return sorted(({"status": r.status, "kind": r.kind, "culprit": r.culprit,
                        "stage": extras.get(r.id, {}).get("stage"),
                        "members": len(r.symptoms)} for r in store.records()),
                      key=lambda f: (f["culprit"] or "", f["kind"], f["members"]))
    finally:
        store.close()


def shared_seconds(results_dir: Path) -> float:
    """Seconds the serial night's asv runs spent on the families that may share a host: the
    durations asv recorded for their benchmarks (each row's `duration`) and for the
    `setup_cache` of their modules ("<setup_cache MODULE:LINE>" in `durations`), over every
    commit. A re-measured benchmark keeps the duration of its last run."""
    total = sum(sum(durations) for name, durations in
                ResultsStore(results_dir).durations().items()
                if metrics.metric_for(name).shares_host)
    for document in ResultsStore(results_dir, MACHINE).documents():
        names = list(document.get("results", {}))
        for key, seconds in document.get("durations", {}).items():
            if not key.startswith("<setup_cache "):
                continue
            module = key.removeprefix("<setup_cache ").split(":")[0]
            served = [n for n in names if n.startswith(f"{module}.")]
            if seconds and served and metrics.metric_for(served[0]).shares_host:
                total += seconds
    return total


def stores(serial: Path, distributed: Path, repo: Path, spent: list[int]) -> dict:
    """Both stores, point by point: per family the largest departure of a point's value
    (median) from the serial store's, the numerics' exact equality, and the samples each
    store holds against what its night says it measured (`spent`: the extra samples each
    re-measurement reports; the rest, the night's own samples, must be equal in both)."""
    frames = [ResultsStore(d, MACHINE, repo).frame() for d in (serial, distributed)]
    keyed = [{(r.benchmark, r.params, r.commit): r for r in f.itertuples()} for f in frames]
    both = sorted(keyed[0].keys() & keyed[1].keys())
    families: dict[str, list[float]] = {}
    for key in both:
        a, b = keyed[0][key], keyed[1][key]
        if a.status == b.status == "ok":
            families.setdefault(metrics.metric_for(key[0]).name, []).append(b.value / a.value)
    totals = [int(f.loc[f["status"] == "ok", "samples"].map(_count).sum()) for f in frames]
    # a unit merged twice repeats its samples exactly; device time's seeded-noise draws
    # never repeat by chance
    duplicated = [sum(_count(s) - len(set(s)) for name, s in zip(f["benchmark"], f["samples"],
                                                                strict=True)
                      if _count(s) and metrics.metric_for(name).name == "device_time")
                  for f in frames]
    return {"points": [len(k) for k in keyed], "in_both": len(both),
            "ratio_to_serial": {name: {"points": len(r), "equal": sum(x == 1 for x in r),
                                       "min": min(r), "max": max(r),
                                       "median_abs_departure": statistics.median(
                                           abs(x - 1) for x in r)}
                                for name, r in sorted(families.items())},
            "samples": totals, "remeasurement_spent": spent,
            "night_samples": [total - extra for total, extra in zip(totals, spent, strict=True)],
            "repeated_device_samples": duplicated}


def spent_of(log: Path) -> int:
    """The extra samples the night's re-measurement says it spent."""
    found = re.findall(r"re-measured (\d+) extra samples", log.read_text())
    return int(found[-1]) if found else 0


def _count(samples) -> int:
    return len(samples) if isinstance(samples, list | tuple) else 0


def earlier_serial(out: Path, earlier: dict) -> dict:
    """The serial night an earlier run of this script (`earlier`, its report) left in
    `out`."""
    if (out / "serial" / "night.json").is_file():
        return json.loads((out / "serial" / "night.json").read_text())
    return {"seconds": earlier["night_seconds"]["serial"], "exit": earlier["exit"]["serial"],
            "bisections": earlier["bisections"]["serial"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="a new directory")
    parser.add_argument("--commits", type=int, default=12)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--grid", choices=("demo", "full"), default="demo")
    parser.add_argument("--bench", help="asv --bench selection (default: the whole suite)")
    parser.add_argument("--stride", type=int, default=1,
                        help="the nightly's stride (above 1: bisections over longer ranges)")
    parser.add_argument("--again", choices=("workers",),
                        help="run only the executor's night again, beside OUT's serial one")
    args = parser.parse_args()
    out = args.out.resolve()
    runs = {}
    if args.again:
        earlier = json.loads((out / "scaleout.json").read_text())
        runs["serial"] = earlier_serial(out, earlier)
        shutil.rmtree(out / "workers", ignore_errors=True)
        origin = out / "serial" / "repo"  # the serial night's history, commit for commit
        commits, planted = earlier["commits"], earlier["planted"]
    else:
        out.mkdir(parents=True)
        records = scratch.build(out / "history", plan(args.commits))
        origin = out / "history"
        commits, planted = len(records), [r.sha for r in records if r.injection]
    env = {"SPYRE_REGRESS_GRID": args.grid} if args.grid == "demo" else {}
    extra = ["--bench", args.bench] if args.bench else []
    for name, flags in (("serial", []), ("workers", ["--workers", str(args.workers)])):
        if name in runs:
            continue
        root = out / name
        root.mkdir()
        subprocess.run(["git", "clone", "--quiet", str(origin), str(root / "repo")], check=True)
        print(f"{name}: nightly {' '.join(flags) or '(serial)'} ...", flush=True)
        runs[name] = night(root, root / "repo", extra + flags, env, stride=args.stride)
        print(f"  {runs[name]['seconds']:.0f} s, exit {runs[name]['exit']}", flush=True)
    units = json.loads((out / "workers" / "state" / "units.json").read_text())
    shared_phase = units["phases"][0]
    assert not shared_phase["alone"], "the executor's first phase is the shared families'"
    serial_shared = shared_seconds(out / "serial" / "repo" / ".asv" / "results")
    report = {
        "version": 1, "commits": commits, "workers": args.workers, "grid": args.grid,
        "stride": args.stride,
        "bench": args.bench, "planted": planted,
        "night_seconds": {k: round(v["seconds"], 1) for k, v in runs.items()},
        "bisections": {k: v["bisections"] for k, v in runs.items()},
        "night_ratio": round(runs["serial"]["seconds"] / runs["workers"]["seconds"], 3),
        "exit": {k: v["exit"] for k, v in runs.items()},
        "shared_families": {"serial_seconds": round(serial_shared, 1),
                            "executor_phase_seconds": round(shared_phase["seconds"], 1),
                            "units": shared_phase["units"],
                            "ratio": round(serial_shared / shared_phase["seconds"], 3)},
        "findings": {k: findings(out / k / "state") for k in runs},
        "stores": stores(out / "serial" / "repo" / ".asv" / "results",
                         out / "workers" / "repo" / ".asv" / "results",
                         out / "serial" / "repo",
                         [spent_of(out / k / "nightly.log") for k in ("serial", "workers")]),
    }
    report["same_findings"] = report["findings"]["serial"] == report["findings"]["workers"]
    (out / "scaleout.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "findings"}, indent=1))
    print("same findings:", report["same_findings"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
