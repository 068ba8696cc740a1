"""How often the pre-merge gate cries wolf, and what it still catches: `asv continuous` on
pairs of commits that change nothing and on pairs that make one thing slower.

Builds a scratch clone of this repository (the working tree's asv.conf.json and benchmarks/
laid over it and committed as the base, as tests/e2e/test_asv_continuous.py does), then one
commit per pair on top of the base, each on its own branch:

- no-change pairs (`--pairs nochange`): a comment in a compiler stage, a docs change, a rename
  that changes no artifact, a test-only change, a comment in the executor, a comment in the
  config (each touches what its name says and nothing a benchmark can see);
- slowdowns (`--pairs slowdown`): the CPU-fallback throughput halved (the device slowdown of
  tests/e2e/test_asv_continuous.py), the DRAM model derated (device rows), a ~x1.2 host-time
  slowdown of one workload (layernorm: its kernels checked against two more computations), a
  ~25% CPU slowdown of one compile stage (sdsc: three descriptors in ten canonicalised once
  more), a ~3% single-stage compile-work step (sdsc: every other descriptor built twice),
  and the waits a CPU clock cannot see (benchmarks/waits.py): `spyre_sim.compile` sleeping
  0.25 s, the sdsc stage sleeping 50 ms, the backend stage running a child process that
  burns 0.2 s of CPU.

`--project inductor` calibrates the example Inductor-based project's suite instead
(examples/inductor_project, its working tree committed as the base of a repository of its
own): a docs change (`inductor-docs`), and its backend building the wrapper in C++ too
(`inductor-cpp`: `cpp_wrapper`, about twice the C++ compiler's CPU per cold compile).

Runs `asv continuous --machine MACHINE base head` for each (`--runs` times), the full suite
unless `--bench`, and prints per run its exit status, wall time and every changed row; then,
from the samples asv stored for the no-change runs, per family: the false-row rate (rows
flagged over rows compared) and the smallest slowdown asv's rule would flag (each row's B
samples scaled up in 1% steps until `regressions.stats.asv_verdict` says worse; median and
90th percentile over rows and runs), at asv's default factor 1.1 and at `--factor`.

    python scripts/premerge_calibration.py OUT --pairs nochange
    python scripts/premerge_calibration.py OUT --pairs slowdown --runs 3
    python scripts/premerge_calibration.py OUT --pairs docs --runs 3 --neighbour
    python scripts/premerge_calibration.py OUT --pairs work3 --factor 1.02 --bench CompileWork
    python scripts/premerge_calibration.py OUT --pairs compile-sleep,stage-sleep --runs 3
    python scripts/premerge_calibration.py OUT --project inductor --pairs inductor-cpp --runs 3
    python scripts/premerge_calibration.py OUT --report       # the tables again from OUT

`--neighbour` runs a CPU-bound process beside asv for the whole run, as a shared CI runner
has. OUT keeps the scratch clone (and its asv environment, built once) and calibration.json.
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from regressions.groundtruth.inductor_history import SOURCES as INDUCTOR_SOURCES  # noqa: E402
from regressions.groundtruth.scenarios import INJECTIONS, Edit, apply_edit  # noqa: E402
from regressions.records.results_store import ResultsStore  # noqa: E402
from regressions.stats import asv_verdict  # noqa: E402

MACHINE = "premerge-calibration"
CALIBRATION_VERSION = 2  # 2: each run names its `project`
FAMILIES = {"CompileTotal": "compile total", "CompileStage": "compile stage",
            "CompileWork": "compile work", "CompileWithBuild": "compile with build",
            "Compile.": "compile", "ExecuteDeviceTime": "device time",
            "ExecuteHostTime": "host time", "Numerics": "numerics"}
# The parts of a compile's wall time other than its CPU, by the end of their rows' names.
PART_FAMILIES = {"_children_cpu": "children's CPU", "_blocked": "blocked"}
# The projects a pair is made in: this repository, or the example Inductor-based project
# (regressions/groundtruth/inductor_history.py builds its histories the same way).
INDUCTOR_FOLDER = "examples/inductor_project"
STEPS = [1 + i / 100 for i in range(0, 201)]  # x1.00 .. x3.00

# Each pair: (kind, what it is, edits applied on top of the base).
PAIRS: dict[str, tuple[str, str, tuple[Edit, ...]]] = {
    "stage-comment": ("nochange", "a comment in a compiler stage (sdsc)", (
        Edit("spyre_sim/stages/sdsc.py", "def core_to_slice(",
             "# superdsc.py: core_id -> Mod(floor(core_id / inner), split)\n"
             "def core_to_slice("),)),
    "docs": ("nochange", "a docs change (README)", (
        Edit("README.md", "## Quick start\n", "## Quick start\n\nStart here.\n"),)),
    "rename": ("nochange", "a rename that changes no artifact (graph_builder's _infer_shape)",
               ()),
    "test-only": ("nochange", "a test-only change", (
        Edit("tests/test_dlfloat.py", '"""DLFloat16 (SEN169_FP16): the format bit for bit',
             '"""DLFloat16 (SEN169_FP16), Spyre\'s 16-bit format: the format bit for bit'),)),
    "executor-comment": ("nochange", "a comment in the executor", (
        Edit("spyre_sim/executor.py", "STICK_ELEMS = 64",
             "# fp16 values live in fp32 tensors: rounding, not storage, makes them fp16.\n"
             "STICK_ELEMS = 64"),)),
    "config-comment": ("nochange", "a comment in the knob table", (
        Edit("spyre_sim/config.py", "KNOBS: tuple[Knob, ...] = (",
             "# The decisions a knob bisector may toggle, in pipeline order.\n"
             "KNOBS: tuple[Knob, ...] = ("),)),
    "fallback-half": ("slowdown", "CPU-fallback throughput halved (device rows: embedding)", ()),
    "dram": ("slowdown", "DRAM model derated 136.5 -> 100 GB/s (device rows)",
             INJECTIONS["dram_derate"].edits),
    # Two checks: x1.20 on layernorm's warm call (one check measured x1.09-1.13, three x1.39)
    "host-layernorm": ("slowdown", "layernorm's kernels checked by two more computations "
                                   "(host time of one workload, x1.2)", (
        Edit("spyre_sim/executor.py", "    if result is None:\n"
                                      "        result = OPS[node.op].compute(*args, **attrs)\n",
             "    if result is None:\n"
             "        result = OPS[node.op].compute(*args, **attrs)\n"
             "    if node.op == \"layernorm\":  # check the kernel against two more runs\n"
             "        for _ in range(2):\n"
             "            assert torch.equal(result, OPS[node.op].compute(*args, **attrs))\n"),)),
    "sdsc-check": ("slowdown", "sdsc canonicalises three descriptors in ten once more "
                               "(~25% more CPU in one compile stage)", (
        Edit("spyre_sim/stages/sdsc.py", '    log.info("sdsc: %d descriptors", len(sdscs))\n',
             "    for name in list(sdscs)[: max(1, 3 * len(sdscs) // 10)]:  # spot check\n"
             "        assert canonical_json(sdscs[name])\n"
             '    log.info("sdsc: %d descriptors", len(sdscs))\n'),)),
    "work3": ("slowdown", "sdsc builds every other descriptor twice (a ~3% compile-work step "
                          "in one stage)", (
        Edit("spyre_sim/stages/sdsc.py", '    log.info("sdsc: %d descriptors", len(sdscs))\n',
             "    for step in [s for s in program.steps if isinstance(s, KernelSpec)][::2]:\n"
             "        assert descriptor(step) == sdscs[step.name]  # deterministic\n"
             '    log.info("sdsc: %d descriptors", len(sdscs))\n'),)),
    # The waits of benchmarks/waits.py: time no CPU clock of the compiling process sees.
    "compile-sleep": ("slowdown", "spyre_sim.compile waits 0.25 s for a device lock (blocked "
                                  "time of every compile)", (
        Edit("spyre_sim/pipeline.py",
             "    config = config or Config()\n    torch._dynamo.reset()\n",
             "    config = config or Config()\n"
             "    time.sleep(0.25)  # let the device's compile lock settle\n"
             "    torch._dynamo.reset()\n"),)),
    "stage-sleep": ("slowdown", "the sdsc stage waits 50 ms (blocked time of one stage)",
                    INJECTIONS["sdsc_wait"].edits),
    "stage-child": ("slowdown", "the backend stage runs a child process that burns 0.2 s of "
                                "CPU (children's CPU of one stage)",
                    INJECTIONS["backend_child"].edits),
    # The example Inductor-based project (`--project inductor`).
    "inductor-docs": ("nochange", "a docs change in the example project (README)", (
        Edit("README.md", "# inductor-example\n", "# inductor-example\n\nStart here.\n"),)),
    "inductor-cpp": ("slowdown", "the example backend builds its wrapper in C++ too "
                                 "(cpp_wrapper: its C++ build's CPU about x2)", (
        Edit("inductor_example/backend.py", "CONFIG: dict[str, Any] = {}",
             'CONFIG: dict[str, Any] = {"cpp_wrapper": True}'),)),
}
# The pairs made in the example project; every other pair is made in this repository.
INDUCTOR_PAIRS = ("inductor-docs", "inductor-cpp")
# The pairs whose edit is a regular-expression substitution: (path, pattern, replacement,
# how many times it must match).
SUBSTITUTIONS: dict[str, tuple[str, str, str | Callable[[re.Match[str]], str], int]] = {
    "fallback-half": ("spyre_sim/device.py", r"(host_fallback_elems_per_us: float = )([0-9.]+)",
                      lambda m: f"{m[1]}{float(m[2]) / 2}", 1),
    "rename": ("spyre_sim/graph_builder.py", r"\b_infer_shape\(", "_inferred_shape(", 2),
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def asv(repo: Path, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    """asv of this interpreter; its directory first on PATH, so asv finds python3.11."""
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable),
                                                 os.environ.get("PATH", "")]))
    return subprocess.run([sys.executable, "-m", "asv", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=timeout)


def scratch_clone(out: Path, project: str = "spyre_sim") -> tuple[Path, str]:
    """OUT/repo: a clone of this repository with the working tree's suite committed on top
    as branch `base`; (repo, base sha). An existing clone (its asv environment built) gets a
    new base, and its pairs are made again, when the working tree's suite has changed.
    `project` inductor: OUT/inductor-repo, a repository of the example project's working
    tree (examples/inductor_project), its base made the same way."""
    repo = out / ("inductor-repo" if project == "inductor" else "repo")
    if not repo.exists():
        if project == "inductor":
            git_init(repo)
        else:
            subprocess.run(["git", "clone", "--quiet", str(ROOT), str(repo)], check=True)
        git(repo, "config", "user.name", "premerge calibration")
        git(repo, "config", "user.email", "premerge-calibration@example.invalid")
        git(repo, "branch", "clone", "HEAD")
        done = asv(repo, "machine", "--yes", "--machine", MACHINE)
        if done.returncode != 0:
            raise SystemExit(f"asv machine failed: {done.stdout}{done.stderr}")
    git(repo, "checkout", "--quiet", "-B", "main", "clone")
    if project == "inductor":
        lay_over(ROOT / INDUCTOR_FOLDER, repo, INDUCTOR_SOURCES)
    else:
        lay_over(ROOT, repo, ("asv.conf.json", "benchmarks"))
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "--allow-empty", "-m", "the asv suite under calibration")
    if git(repo, "branch", "--list", "base") and \
            not git(repo, "diff", "--name-only", "base", "HEAD"):
        git(repo, "checkout", "--quiet", "-B", "main", "base")  # the same suite: keep it
    else:
        git(repo, "branch", "-f", "base", "HEAD")
        for branch in git(repo, "branch", "--list", "pair/*").split():
            git(repo, "branch", "-D", branch.strip("* "))
    return repo, git(repo, "rev-parse", "base")


def git_init(repo: Path) -> None:
    """A new repository holding the example project's working tree, as its first commit."""
    repo.mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch", "main")
    git(repo, "config", "user.name", "premerge calibration")
    git(repo, "config", "user.email", "premerge-calibration@example.invalid")
    lay_over(ROOT / INDUCTOR_FOLDER, repo, INDUCTOR_SOURCES)
    (repo / ".gitignore").write_text("/.asv/\n__pycache__/\n*.egg-info/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "import inductor-example")


def lay_over(source: Path, repo: Path, names: tuple[str, ...]) -> None:
    """`names` (files and folders) of `source` copied over the repository's own."""
    for name in names:
        target = repo / name
        if target.is_dir():
            shutil.rmtree(target)
        if (source / name).is_dir():
            shutil.copytree(source / name, target,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source / name, target)


def pair_commit(repo: Path, name: str) -> str:
    """The pair's commit on branch `pair/<name>` (made once, on top of the base)."""
    branch = f"pair/{name}"
    if git(repo, "branch", "--list", branch):
        return git(repo, "rev-parse", branch)
    git(repo, "checkout", "--quiet", "-B", branch, "base")
    for edit in PAIRS[name][2]:
        apply_edit(repo, edit)
    if name in SUBSTITUTIONS:
        path, pattern, replacement, expected = SUBSTITUTIONS[name]
        text, count = re.subn(pattern, replacement, (repo / path).read_text())
        if count != expected:
            raise SystemExit(f"{name}: {pattern!r} matched {count} times in {path}")
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", f"calibration: {PAIRS[name][1]}")
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "--quiet", "main")
    return sha


def changed_rows(output: str) -> dict[str, str]:
    """asv's comparison table: benchmark name -> its mark (+ worse, - better)."""
    rows = {}
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 5 and cells[4].startswith("bench_") \
                and cells[0] in "+-" and cells[0]:
            rows[cells[4]] = cells[0] + " " + cells[3]
    return rows


def family(benchmark: str) -> str:
    """A row's family, and for a part of a compile's wall time other than its CPU, the part:
    "compile stage blocked"."""
    base = next((name for key, name in FAMILIES.items() if key in benchmark), "other")
    method = benchmark.split("(")[0]
    part = next((name for end, name in PART_FAMILIES.items() if method.endswith(end)), "")
    return f"{base} {part}" if part else base


def run_pair(repo: Path, base: str, name: str, bench: list[str], factor: float | None,
             neighbour: bool, project: str = "spyre_sim") -> dict:
    """One `asv continuous` of base against the pair's commit; its verdict and timing."""
    head = pair_commit(repo, name)
    arguments = ["continuous", "--machine", MACHINE]
    for regex in bench:
        arguments += ["--bench", regex]
    if factor:
        arguments += ["--factor", str(factor)]
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if neighbour else None
    started = time.monotonic()
    try:
        done = asv(repo, *arguments, base, head)
    finally:
        if busy:
            busy.kill()
            busy.wait()
    return {"pair": name, "project": project, "kind": PAIRS[name][0], "exit": done.returncode,
            "seconds": round(time.monotonic() - started, 1), "neighbour": neighbour,
            "factor": factor or 1.1, "bench": bench, "rows": changed_rows(done.stdout),
            "load": round(os.getloadavg()[0], 2), "base": base, "head": head,
            "tail": done.stdout[-3000:] + done.stderr[-2000:]}


def smallest_flagged(before: list[float], after: list[float], factor: float) -> float | None:
    """The smallest slowdown of `after` (1% steps) that asv's rule flags as worse."""
    return next((s for s in STEPS if asv_verdict(before, [v * s for v in after], factor) > 0),
                None)


def sample_figures(repo: Path, run: dict, factor: float) -> dict[str, dict]:
    """Per family, from the samples asv stored for the run's two commits: rows compared,
    rows asv's rule flags, and each row's smallest flagged slowdown. Rows whose median moved
    by 3% or more go into `run["moved"]` (name -> ratio), to say what a slowdown moved."""
    store = ResultsStore(repo / ".asv" / "results", MACHINE)
    before, after = store.samples_at(run["base"]), store.samples_at(run["head"])
    figures: dict[str, dict] = {}
    run["moved"] = {}
    for key, samples in before.items():
        other = after.get(key)
        if not samples or not other:
            continue
        ratio = statistics.median(other) / statistics.median(samples)
        if abs(ratio - 1) >= 0.03:
            run["moved"][f"{key[0]}{key[1]}"] = round(ratio, 3)
        mine = figures.setdefault(family(key[0]), {"rows": 0, "flagged": 0, "smallest": []})
        mine["rows"] += 1
        mine["flagged"] += asv_verdict(list(samples), list(other), factor) != 0
        mine["smallest"].append(smallest_flagged(list(samples), list(other), factor))
    return figures


def round_spread(repo: Path, runs: list[dict]) -> None:
    """Which unit of a clock sample is independent, from every commit's stored samples: asv
    stores a row's samples round after round, so a row with `rounds` rounds of `children`
    samples splits into its rounds. Per family (medians over rows and commits): how the
    children of one round spread, how the rounds' medians spread, and the rounds' spread over
    what independent children would give them (1: the round adds nothing; 3: where a round
    ran triples the spread, and its children are closer to one draw than to `children`).
    Only the commits of `runs` (one suite, one set of rounds) are read."""
    store = ResultsStore(repo / ".asv" / "results", MACHINE)
    meta = store.benchmarks()
    # The commits of OUT's runs only: an older base may have run with other rounds.
    commits = sorted({run[side] for run in runs for side in ("base", "head")})
    samples = {commit: store.samples_at(commit) for commit in commits}
    per_family: dict[str, list[tuple[float, float, float]]] = {}
    for name, info in meta.items():
        rounds = int(info.get("rounds") or 1)
        if rounds < 2 or family(name) == "other":
            continue
        taken = [list(s) for found in samples.values() for (key, _), s in found.items()
                 if key == name and s and len(s) > 1]
        children = max((len(s) for s in taken), default=0) // rounds
        for values in taken:
            chunks = [values[i:i + children] for i in range(0, len(values), children)]
            chunks = [c for c in chunks if len(c) == children]
            if children < 2 or len(chunks) < 2:
                continue
            middle = statistics.median(values)
            within = statistics.median(statistics.stdev(c) for c in chunks) / middle
            between = statistics.stdev(statistics.median(c) for c in chunks) / middle
            expected = within / children ** 0.5 * 1.2533  # a median's error, normal samples
            per_family.setdefault(family(name), []).append(
                (within, between, between / expected if expected else float("inf")))
    print(f"  {'family':14s} {'rows':>5s} {'within a round':>15s} {'between rounds':>15s} "
          f"{'over independent':>17s}")
    for name, figures in sorted(per_family.items()):
        within, between, over = (statistics.median(f[i] for f in figures) for i in range(3))
        print(f"  {name:14s} {len(figures):>5d} {within:>15.1%} {between:>15.1%} "
              f"{over:>16.1f}x")


def report(runs: list[dict]) -> None:
    print(f"{'pair':18s} {'exit':>4s} {'wall':>6s} {'load':>5s}  changed rows")
    for run in runs:
        marks = sorted(run["rows"].items())
        what = ", ".join(f"{mark} {name}" for name, mark in marks[:6]) or "none"
        more = f" (+{len(marks) - 6} more)" if len(marks) > 6 else ""
        tag = " [neighbour]" if run["neighbour"] else ""
        print(f"{run['pair']:18s} {run['exit']:>4d} {run['seconds']:>5.0f}s "
              f"{run['load']:>5.2f}  {what}{more}{tag}")
        if run["kind"] == "slowdown" and run.get("moved"):
            moved = sorted(run["moved"].items(), key=lambda item: -abs(item[1] - 1))
            print(f"{'':37s}moved 3% or more: " + ", ".join(
                f"{name} x{ratio:.3f}{' (flagged)' if name in run['rows'] else ''}"
                for name, ratio in moved[:4]) + (f" (+{len(moved) - 4} more)"
                                                  if len(moved) > 4 else ""))
    quiet = [r for r in runs if r["kind"] == "nochange" and "families" in r]
    for neighbour in (False, True):
        chosen = [r for r in quiet if r["neighbour"] == neighbour]
        if not chosen:
            continue
        print(f"\nno-change pairs{' beside a CPU-bound neighbour' if neighbour else ''}: "
              f"{len(chosen)} runs, {sum(r['exit'] != 0 for r in chosen)} exited non-zero, "
              f"{sum(bool(r['rows']) for r in chosen)} printed a changed row")
        names = sorted({name for r in chosen for name in r["families"]})
        print(f"  {'family':30s} {'rows':>5s} {'false rows':>10s} {'rate':>7s} "
              f"{'flags at (median, p90)':>24s}")
        for name in names:
            figures = [r["families"][name] for r in chosen if name in r["families"]]
            rows, flagged = sum(f["rows"] for f in figures), sum(f["flagged"] for f in figures)
            smallest = sorted(s if s is not None else float("inf")
                              for f in figures for s in f["smallest"])
            p90 = smallest[min(len(smallest) - 1, int(0.9 * len(smallest)))]
            print(f"  {name:30s} {rows // len(figures):>5d} {flagged:>10d} "
                  f"{flagged / rows:>7.2%}   x{statistics.median(smallest):.2f}, x{p90:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--pairs", default="nochange",
                        help="'nochange', 'slowdown', 'all' or comma-separated pair names "
                             f"({', '.join(PAIRS)})")
    parser.add_argument("--runs", type=int, default=1, help="runs of each pair")
    parser.add_argument("--bench", action="append", default=[],
                        help="asv --bench regex (repeatable; default: the full suite)")
    parser.add_argument("--factor", type=float, help="asv --factor (default: asv's 1.1)")
    parser.add_argument("--neighbour", action="store_true",
                        help="a CPU-bound process beside asv for the whole run")
    parser.add_argument("--project", choices=("spyre_sim", "inductor"), default="spyre_sim",
                        help="the suite calibrated: this repository's, or the example "
                             "Inductor-based project's (its pairs: "
                             f"{', '.join(INDUCTOR_PAIRS)})")
    parser.add_argument("--report", action="store_true", help="print OUT's tables and stop")
    parser.add_argument("--spread", action="store_true",
                        help="per family, how a clock row's rounds spread against their "
                             "children, from the samples OUT's store holds (runs of a suite "
                             "that took several samples per round); then stop")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "calibration.json"
    runs = json.loads(store.read_text())["runs"] if store.exists() else []
    if args.report:
        report(runs)
        return 0
    if args.spread:
        round_spread(args.out / "repo", runs)
        return 0
    kinds = {"nochange", "slowdown"}
    known = [n for n in PAIRS if (n in INDUCTOR_PAIRS) == (args.project == "inductor")]
    names = [n for n in known if args.pairs == "all" or args.pairs == PAIRS[n][0]] \
        if args.pairs in kinds | {"all"} else args.pairs.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown pairs {unknown} for --project {args.project}; known: "
                     f"{', '.join(known)}")
    repo, base = scratch_clone(args.out, args.project)
    for index in range(args.runs):
        for name in names:
            run = run_pair(repo, base, name, args.bench, factor=args.factor,
                           neighbour=args.neighbour, project=args.project)
            run["families"] = sample_figures(repo, run, args.factor or 1.1)
            runs.append(run)
            store.write_text(json.dumps({"version": CALIBRATION_VERSION, "runs": runs},
                                        indent=1))
            print(f"[{index + 1}/{args.runs}] {name}: exit {run['exit']}, "
                  f"{run['seconds']:.0f} s, {len(run['rows'])} changed rows "
                  f"{sorted(run['rows'].items())}", flush=True)
    report(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
