"""Which commits of a torch-spyre history compile each workload of the suite's grid, on a CPU
with the `_C` stand-in: the front-half issue's range check.

For every first-parent commit from REV (default: torch 2.13's upgrade, "Upgrade to pytorch
2.13 (#3374)") to the branch's head, the commit's tree is exported and one process compiles
every point of the torch-spyre suite's default grid through backends/torch_spyre.py (the
six workloads at both sizes, the graph-size axis at the smaller), and records, per point,
whether it compiled, else its failure's class and error; and which extension names the
commit uses that the stand-in lacks. A commit is "complete" when it compiles every point the
head compiles. Results go to a JSON-lines file, one commit a line, and a run resumes where it
stopped; `--workers 2` compiles two commits side by side (counts, not clocks, are read).

    python scripts/torch_spyre_range.py --repo CHECKOUT --out range.jsonl [--from REV]
        [--stride N] [--workers N] [--summary]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from backends import interface
from regressions import git

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "suites" / "torch_spyre" / "benchmarks" / "workloads.py"
UPGRADE_SUBJECT = "Upgrade to pytorch 2.13 (#3374)"
RANGE_VERSION = 1

CHILD = """
import importlib.util, json, sys, time, warnings
warnings.simplefilter("ignore")
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
backend = load("spyre_regress_backend", sys.argv[1])
workloads = load("workloads", sys.argv[2])
stand_in = backend.companion("torch_spyre_stand_in")
import torch_spyre, pathlib
package = pathlib.Path(torch_spyre.__file__).parent
points = [(n, s) for n in workloads.SUITE for s in workloads.SEQ_LENGTHS]
points += [(n, workloads.SEQ_LENGTHS[0]) for n in workloads.STACKS]
found = {"missing_names": sorted(stand_in.missing_names(package)),
         "passes": list(backend.checkout_passes()), "points": {}}
for name, seq in points:
    started = time.process_time()
    try:
        backend.compile(*workloads.build(name, seq))
        found["points"][f"{name}-{seq}"] = {"ok": True, "cpu_s": time.process_time() - started}
    except backend.CompileFailure as failure:
        found["points"][f"{name}-{seq}"] = {"ok": False, "kind": failure.kind,
                                           "stage": failure.stage, "error": failure.detail}
print(json.dumps(found))
"""


def first_parent_range(repo: Path, start: str, head: str) -> list[str]:
    """`start` and every first-parent commit after it up to `head`, oldest first."""
    return [git.resolve(repo, start), *git.first_parent_history(repo, head, start)]


def upgrade_commit(repo: Path, head: str) -> str:
    """The commit whose subject is torch 2.13's upgrade (#3374)."""
    found = subprocess.run(["git", "-C", str(repo), "log", "--first-parent", "--format=%H",
                            f"--grep={UPGRADE_SUBJECT}", "--fixed-strings", head],
                           capture_output=True, text=True, check=True).stdout.split()
    if not found:
        raise SystemExit(f"no commit titled {UPGRADE_SUBJECT!r} in {repo}; pass --from REV")
    return found[-1]


def measure_commit(repo: Path, sha: str, timeout: float) -> dict:
    """One commit's compile of every grid point, in a fresh process on its exported tree."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="torch-spyre-range-") as scratch:
        tree = git.export_tree(repo, sha, Path(scratch) / "tree")
        try:
            done = subprocess.run(
                [sys.executable, "-P", "-c", CHILD, str(interface.module_path("torch_spyre")),
                 str(CATALOGUE)], capture_output=True, text=True, timeout=timeout,
                env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                     "HOME": scratch})
            lines = done.stdout.strip().splitlines()
            result = json.loads(lines[-1]) if done.returncode == 0 and lines else {
                "crash": (done.stderr or done.stdout).strip().splitlines()[-3:]}
        except subprocess.TimeoutExpired:
            result = {"crash": [f"timed out after {timeout:.0f} s"]}
    return {"version": RANGE_VERSION, "commit": sha, "subject": git.commit_info(repo, sha).subject,
            "seconds": round(time.monotonic() - started, 1), **result}


def summary(lines: list[dict]) -> str:
    """Commits that compile every point the head compiles; failures by class."""
    head = lines[-1]
    wanted = {p for p, r in head.get("points", {}).items() if r["ok"]}
    complete = [line for line in lines
                if all(line.get("points", {}).get(p, {}).get("ok") for p in wanted)]
    classes: Counter = Counter()
    for line in lines:
        if "crash" in line:
            classes["crash"] += 1
        for result in line.get("points", {}).values():
            if not result["ok"]:
                classes[f"{result['kind']} in {result['stage']}"] += 1
    missing = sorted({n for line in lines for n in line.get("missing_names", [])})
    return "\n".join([
        f"{len(complete)} of {len(lines)} commits ({100 * len(complete) / len(lines):.1f}%) "
        f"compile every one of the {len(wanted)} points the head compiles",
        "failed points by class: " + (", ".join(f"{k} {v}" for k, v in classes.most_common())
                                      or "none"),
        "extension names a commit uses that the stand-in lacks: " + (", ".join(missing)
                                                                       or "none"),
        f"wall seconds per commit: median "
        f"{sorted(line['seconds'] for line in lines)[len(lines) // 2]:.0f}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a torch-spyre checkout")
    parser.add_argument("--out", type=Path, required=True, help="results, JSON lines")
    parser.add_argument("--from", dest="start", help="the first commit (default: #3374)")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--stride", type=int, default=1, help="every Nth commit of the range "
                        "(the first and the head always)")
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--summary", action="store_true", help="summarize --out only")
    args = parser.parse_args(argv)
    done = [json.loads(line) for line in args.out.read_text().splitlines()] \
        if args.out.exists() else []
    if not args.summary:
        commits = first_parent_range(args.repo, args.start or upgrade_commit(
            args.repo, args.head), args.head)
        commits = [c for i, c in enumerate(commits)
                   if i % args.stride == 0 or i == len(commits) - 1]
        todo = [c for c in commits if c not in {line["commit"] for line in done}]
        print(f"{len(commits)} commits, {len(todo)} to compile", flush=True)
        with ThreadPoolExecutor(args.workers) as pool, args.out.open("a") as out:
            for line in pool.map(lambda c: measure_commit(args.repo, c, args.timeout), todo):
                out.write(json.dumps(line) + "\n")
                out.flush()
                ok = sum(r["ok"] for r in line.get("points", {}).values())
                print(f"{line['commit'][:10]} {ok}/{len(line.get('points', {}))} "
                      f"{line['seconds']:.0f} s {line['subject'][:60]}", flush=True)
        order = {c: i for i, c in enumerate(commits)}
        done = sorted((json.loads(x) for x in args.out.read_text().splitlines()),
                      key=lambda line: order.get(line["commit"], -1))
    print(summary(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
