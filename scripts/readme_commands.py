"""The README's quick-start commands on a fresh clone, each timed: docs/measurements/quick-start.md.

Clones this repository (`git clone`, at `--commit`, default HEAD) into a temporary folder and
runs the commands of the README's "Quick start" (its fenced `sh` blocks, in order) there one
after another, each as written, with bash; prints each one's wall seconds, exit status and
the load as it started. The first command's own breakdown is the demo's (printed at its end,
kept in its `summary.json`'s `seconds`); `--ci` runs `.ci/run` in place of the second
command, as the table measured it (it also installs valgrind and chromium where apt can).
`--quick-loop` then times the fast tests as a developer runs them: `.venv/bin/pip install -e
'.[test]'`, then `.venv/bin/python -m pytest -q -m "not slow" -n 2` (each timed).

This takes the machine for half an hour or more: run it alone (under the machine-wide lock
where one is kept). `--list` prints the commands without running them.

    python scripts/readme_commands.py [--ci] [--quick-loop] [--only 1]
    python scripts/readme_commands.py --list
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICK_LOOP = (".venv/bin/pip install -q -e '.[test]'",
              '.venv/bin/python -m pytest -q -m "not slow" -n 2')


def quick_start_commands(readme: str) -> list[str]:
    """The commands of the README's "## Quick start" section: its fenced `sh` blocks' lines,
    in order."""
    section = re.search(r"(?ms)^## Quick start\n(.*?)(?=^## )", readme)
    if section is None:
        raise SystemExit("the README has no '## Quick start' section")
    blocks = re.findall(r"(?ms)^```sh\n(.*?)^```", section.group(1))
    return [line.strip() for block in blocks for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def timed(command: str, cwd: Path) -> tuple[float, int, float]:
    """Wall seconds, exit status and the 1-minute load as it started, of `command` in bash."""
    load = os.getloadavg()[0]
    start = time.monotonic()
    done = subprocess.run(["bash", "-c", command], cwd=cwd, check=False)
    return time.monotonic() - start, done.returncode, load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="HEAD", help="the commit to clone (default HEAD)")
    parser.add_argument("--ci", action="store_true",
                        help="run .ci/run in place of the second command")
    parser.add_argument("--quick-loop", action="store_true",
                        help="then time the fast tests on two workers")
    parser.add_argument("--only", type=int, nargs="+",
                        help="run only these commands (1 = the first)")
    parser.add_argument("--list", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    commands = quick_start_commands((ROOT / "README.md").read_text())
    if args.ci and len(commands) >= 2:
        commands[1] = "bash .ci/run"
    chosen = [(n, c) for n, c in enumerate(commands, start=1)
              if not args.only or n in args.only]
    if args.quick_loop:
        chosen += [(len(commands) + i, c) for i, c in enumerate(QUICK_LOOP, start=1)]
    if args.list:
        print("\n".join(f"{n}: {c}" for n, c in chosen))
        return 0
    with tempfile.TemporaryDirectory(prefix="readme-commands-") as folder:
        clone = Path(folder) / "spyre-regress"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "checkout", "--quiet", args.commit], cwd=clone, check=True)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, check=True,
                              capture_output=True, text=True).stdout.strip()
        results = []
        for n, command in chosen:
            print(f"--- {n}: {command} (fresh clone at {head})", flush=True)
            results.append((n, command, *timed(command, clone)))
        print(f"\nfresh clone at {head}:")
        for n, command, wall, status, load in results:
            print(f"{n}: {wall:,.0f} s wall ({wall / 60:.0f} min {wall % 60:.0f} s), exit "
                  f"{status}, load {load:.2f} as it started: {command}")
    return max((status for *_, status, _ in results), default=0)


if __name__ == "__main__":
    sys.exit(main())
