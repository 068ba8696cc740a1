"""The tests per room of the code: the counts of docs/reference/testing.md's test pyramid.

    python scripts/count_tests.py

Collects the suite twice with pytest (`--collect-only -q tests`, then only `-m slow`),
counts the collected test ids (parametrized cases one by one) per room of the code, as the
page groups the modules, and prints one row per room: its tests and, in brackets, how many
of them are slow; then the modules no room lists, and the totals.
"""

from __future__ import annotations

import collections
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The page's rooms and the modules (tests/test_<name>.py) each one lists.
ROOMS: dict[str, tuple[str, ...]] = {
    "whole tree": ("architecture", "types", "doc_commands"),
    "spyre_sim/": ("sim_stages", "ops", "dlfloat", "layouts", "cost", "config", "timeline",
                   "pipeline", "decompositions"),
    "backends/": ("backends", "inductor_capture"),
    "benchmarks/": ("asv_suite", "clocks", "compile_work", "kept", "scaleout"),
    "regressions/detection, stats": ("detect", "changepoints", "environment", "remeasure",
                                     "stats", "gate_power"),
    "regressions/bisection, investigation": ("commits", "stage_bisection", "knobs", "minimize",
                                             "investigator", "evidence"),
    "regressions/records": ("asv_documents", "results", "results_store", "lifecycle",
                            "environment_records", "files"),
    "regressions/groundtruth, night, processes": ("scenarios", "month", "night", "processes"),
    "reports/": ("bundle",),
    "spyre_regress/": ("cli_detect", "cli_merge_results", "nightly", "executor", "dashboard",
                       "real_store_check"),
}
E2E = "tests/e2e/"


def room_of(node_id: str) -> str:
    """The room a collected test belongs to: by its file, as the page lists them."""
    path = node_id.split("::", 1)[0]
    if path.startswith(E2E):
        return E2E
    module = Path(path).stem.removeprefix("test_")
    return next((room for room, modules in ROOMS.items() if module in modules),
                f"(no room) {path}")


def count(node_ids: Iterable[str]) -> collections.Counter[str]:
    return collections.Counter(room_of(node) for node in node_ids if "::" in node)


def collected(*marks: str) -> list[str]:
    """The test ids pytest collects in tests/, with `-m` marks if given."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    for mark in marks:
        command += ["-m", mark]
    done = subprocess.run([*command, "tests"], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def rows(every: collections.Counter[str], slow: collections.Counter[str]) -> list[str]:
    order = [*ROOMS, E2E, *sorted(room for room in every if room not in ROOMS and room != E2E)]
    return [f"{room} | {every[room]}" + (f" ({slow[room]})" if slow[room] else "")
            for room in order if every[room]]


def main() -> None:
    every, slow = count(collected()), count(collected("slow"))
    print("\n".join(rows(every, slow)))
    print(f"{sum(every.values())} in all, {sum(slow.values())} slow")


if __name__ == "__main__":
    main()
