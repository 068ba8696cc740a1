"""One full-suite nightly on a scratch history with three planted regressions: what it
reported, and what its clock alerts cost.

Builds a scratch history of `--commits` commits from the installed sources (the first
imports the project, three later ones plant a regression of each kind: numerics in sdsc,
compile time in decompose, device time in kernel; the rest are harmless edits), then runs the
installed `spyre-regress nightly` on it, the full suite unless `--bench`, every `--stride`-th
commit. Prints, and writes to OUT/night.json:

- each planted regression: reported or not, at its commit, with its kind and stage;
- every alert of the night by kind and status, and anything reported that was not planted;
- the clock alerts (compile CPU time, host wall time): how many were raised, how many the
  investigation refuted (`not-reproduced`) and how many a later measurement closed as fixed;
- wall time, re-measurement's line, and the load average when the night ended.

Run it from the installation whose night it measures (its `spyre-regress`, its sources):

    python scripts/night_clock_alerts.py OUT --commits 19 --stride 3
    python scripts/night_clock_alerts.py OUT --commits 19 --stride 3 --positions 5,9,14
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from regressions.groundtruth import scratch
from regressions.records import alert_store

SCRIPT = Path(sys.executable).with_name("spyre-regress")
PLANTED = ("sdsc_fp16_accumulate", "quadratic_verify", "workdiv_m127")
CLOCK_KINDS = ("compile_time", "host_time")
MACHINE = "night-clock-alerts"
NIGHT_CLOCK_ALERTS_VERSION = 1


def plan(commits: int, positions: list[int]) -> list[str | None]:
    """`commits - 1` changes after the import, PLANTED at `positions` (1-based commits)."""
    changes: list[str | None] = [None] * (commits - 1)
    for name, position in zip(PLANTED, positions, strict=True):
        changes[position - 1] = name
    return changes


def night(out: Path, repo: Path, stride: int, bench: str | None) -> dict:
    started = time.monotonic()
    command = [str(SCRIPT), "nightly", "--repo", str(repo), "--state", str(out / "state"),
               "--reports", str(out / "reports"), "--stride", str(stride),
               "--machine", MACHINE]
    if bench:
        command += ["--bench", bench]
    remeasured = ""
    with (out / "nightly.log").open("w") as log, subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
        assert process.stdout is not None  # stdout=PIPE
        for line in process.stdout:
            log.write(f"[{time.monotonic() - started:8.1f}] {line}")
            log.flush()
            if "re-measur" in line:
                remeasured = line.strip()
    return {"seconds": round(time.monotonic() - started), "exit": process.returncode,
            "remeasured": remeasured, "load": round(os.getloadavg()[0], 2)}


def alerts(state: Path) -> list[dict]:
    store = alert_store.AlertStore(state / "alerts.sqlite")
    try:
        extras = store.extras()
        return [{"id": r.id, "status": r.status, "kind": r.kind, "culprit": r.culprit,
                 "stage": extras.get(r.id, {}).get("stage"), "members": len(r.symptoms)}
                for r in store.records()]
    finally:
        store.close()


def summary(records: list[scratch.CommitRecord], found: list[dict]) -> dict:
    from regressions.groundtruth import scenarios

    planted = []
    for record in records:
        if record.injection:
            injection = scenarios.INJECTIONS[record.injection]
            hit = next((a for a in found if a["culprit"] == record.sha
                        and a["kind"] == injection.kind
                        and a["status"] in ("reported", "acknowledged", "fixed")), None)
            planted.append({"injection": injection.name, "commit": record.sha,
                            "kind": injection.kind, "stage": injection.stage,
                            "reported": hit is not None,
                            "stage_found": hit["stage"] if hit else None})
    planted_commits = {p["commit"] for p in planted}
    clock = [a for a in found if a["kind"] in CLOCK_KINDS]
    return {
        "planted": planted,
        "alerts": len(found),
        "by_status": _count(a["status"] for a in found),
        "by_kind": _count(a["kind"] for a in found),
        "reported_not_planted": [a for a in found if a["status"] == "reported"
                                 and a["culprit"] not in planted_commits],
        "clock_alerts": len(clock),
        "clock_refuted": sum(a["status"] == "not-reproduced" for a in clock),
        "clock_fixed": sum(a["status"] == "fixed" for a in clock),
    }


def _count(values) -> dict[str, int]:
    counted: dict[str, int] = {}
    for value in values:
        counted[value] = counted.get(value, 0) + 1
    return counted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--commits", type=int, default=19)
    parser.add_argument("--stride", type=int, default=3)
    parser.add_argument("--positions", default="5,9,14",
                        help="the commits (1-based, after the import) that plant the "
                             "numerics, compile-time and device-time regressions")
    parser.add_argument("--bench", help="asv --bench regex (default: the full suite)")
    args = parser.parse_args()
    positions = [int(p) for p in args.positions.split(",")]
    if len(positions) != 3 or not all(1 <= p < args.commits for p in positions):
        parser.error(f"--positions needs three commits in 1..{args.commits - 1}")
    args.out.mkdir(parents=True, exist_ok=True)
    repo = args.out / "repo"
    records = scratch.build(repo, plan(args.commits, positions))
    ran = night(args.out, repo, args.stride, args.bench)
    found = alerts(args.out / "state")
    result = {"version": NIGHT_CLOCK_ALERTS_VERSION, "night": ran,
              "commits": args.commits, "stride": args.stride, "positions": positions,
              "bench": args.bench, **summary(records, found), "records": found}
    (args.out / "night.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "records"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
