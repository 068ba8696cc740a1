"""The nightly on torch-spyre's history with planted changes and a decoy: what it reported.

    python scripts/torch_spyre_night.py OUT --checkout CHECKOUT [--samples 10]

Clones a torch-spyre checkout into OUT/torch-spyre and commits the planted changes of
`regressions/groundtruth/torch_spyre_history.py` on its newest commit (a provenance decoy, a
slower work division, a quadratic pass, a layout that restickifies, a broken lowering),
writes the suite this tool ships for it (`spyre-regress suite torch_spyre`), then runs the
installed `spyre-regress nightly` on it as tests/e2e/test_torch_spyre_nightly.py does: the
small grid, compile clocks and device time, from the planted history's base on, every
commit. Prints each planted change (reported or not, at its commit, with its kind and
stage), anything else reported, the night's wall time and the load when it ended; the
night's output, each line stamped with its second, is OUT/nightly.log (the phases' seconds
are read from it): the figures of docs/measurements/torch-spyre.md. Run it from the
installation whose night it measures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from regressions.groundtruth import torch_spyre_history
from regressions.records import alert_store

SCRIPT = Path(sys.executable).with_name("spyre-regress")
# As tests/e2e/test_torch_spyre_nightly.py: the compile clocks and the modelled device time.
BENCH = r"bench_compile\.|bench_execute\.ExecuteDeviceTime"


def night(out: Path, suite: Path, since: str, samples: int) -> tuple[int, float]:
    """The installed nightly on the written suite: its exit status and wall seconds."""
    command = [str(SCRIPT), "nightly", "--repo", str(suite), "--stride", "1", "--bench", BENCH,
               "--since", since, "--samples", str(samples), "--state", str(out / "state"),
               "--reports", str(out / "reports")]
    return stamped_run(command, out, {**os.environ, "SPYRE_REGRESS_GRID": "demo"})


def stamped_run(command: list[str], out: Path, env: dict[str, str]) -> tuple[int, float]:
    """`command` run in `out`, its output in OUT/nightly.log with each line stamped with its
    second (the phases' seconds are read from it): its exit status and wall seconds."""
    started = time.monotonic()
    with (out / "nightly.log").open("w") as log, subprocess.Popen(
            command, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True) as process:
        assert process.stdout is not None  # stdout=PIPE
        for line in process.stdout:
            log.write(f"[{time.monotonic() - started:8.1f}] {line}")
            log.flush()
    return process.returncode, time.monotonic() - started


def reported(state: Path) -> list[tuple[str, str, str | None]]:
    """(culprit, kind, stage) of every reported record."""
    store = alert_store.AlertStore(state / "alerts.sqlite")
    try:
        extras = store.extras()
        return [(r.culprit or "", r.kind, extras.get(r.id, {}).get("stage"))
                for r in store.records() if r.status == "reported"]
    finally:
        store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--checkout", type=Path, required=True,
                        help="a torch-spyre checkout whose history reaches torch 2.13's upgrade")
    parser.add_argument("--samples", type=int, default=10,
                        help="samples a side behind each confirmation (the test's: 10)")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    records = torch_spyre_history.build(out / "torch-spyre", args.checkout)
    subprocess.run([str(SCRIPT), "suite", "torch_spyre", "--repo", str(out / "torch-spyre"),
                    "--out", str(out / "bench")], cwd=out, check=True)
    status, seconds = night(out, out / "bench", records[0].sha, args.samples)
    found = reported(out / "state")
    for record in records:
        if record.injection:
            injection = torch_spyre_history.INJECTIONS[record.injection]
            hits = [(kind, stage) for culprit, kind, stage in found if culprit == record.sha]
            print(f"{record.injection} at {record.sha[:10]} ({injection.kind}, "
                  f"{injection.stage}): " + (", ".join(f"reported {kind} at {stage}"
                                                     for kind, stage in hits) or "not reported"))
    planted = {record.sha for record in records if record.injection}
    others = [f for f in found if f[0] not in planted]
    print(f"reported elsewhere: {others or 'nothing'}")
    print(f"nightly exit {status}, {seconds:.0f} s; load {os.getloadavg()[0]:.2f} at its end; "
          f"its output: {out / 'nightly.log'}")


if __name__ == "__main__":
    main()
