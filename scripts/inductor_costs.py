"""The Inductor example's injection sizes, forkserver imports and capture cache, measured.

What the injections of the example's planted history cost, what its forkserver's imports
save, and what keeping the C++ kernel cache saves a capture: the three measured tables of
docs/measurements/inductor.md, each a subcommand.

- `injections`: the planted history of `regressions/groundtruth/inductor_history.py` (its
  `PLAN`, built with `scratch.build` into a temporary folder) measured at every commit by
  the suite's own functions (examples/inductor_project/benchmarks), one fresh process a
  commit, per workload at its default width (gated 2048, MLP 512) and seq 256: the max
  relative error of the compiled output against float64 (bench_numerics' definition), the
  CPU seconds of a cold compile (`bench_compile.Compile.time_compile`, the median of
  `--compiles`) and the wall seconds of a warm call (`bench_execute.ExecuteHostTime`'s call,
  the median of `--calls`). Then each injection against the commit before it, as the table
  gives it.
- `first-compile`: a benchmark's first compile in fresh processes (`--processes` each way),
  with Inductor's modules imported and its vector-ISA probe run before the clock starts (what
  `benchmarks/compiled.py` has asv's forkserver do once a commit) and without.
- `captures`: three captures of tests/test_inductor_capture.py's small MLP, each its own
  process, one C++ kernel cache root (the first fresh, the next two warm): each one's wall
  seconds and codegen stage's seconds, and whether the six stage texts are byte-identical.

Clocks are read: run it alone on the machine (the docs state the load). Nothing is written
into the repository (checkouts, caches and captures go to a temporary folder).

    python scripts/inductor_costs.py injections [--compiles 5 --calls 10]
    python scripts/inductor_costs.py first-compile [--processes 2 --workload mlp]
    python scripts/inductor_costs.py captures
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "inductor_project"
SEQ = 256

# One commit's figures, run in the checkout (its `benchmarks` and `inductor_example`).
MEASURE_COMMIT = """
import copy, json, statistics, sys, time
sys.path.insert(0, ".")
import torch
from benchmarks import bench_compile, compiled, workloads
seq, compiles, calls = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
out = {}
for name in workloads.SUITE:
    program, function, inputs = compiled.compile_workload(name, seq)
    with torch.no_grad():
        got = function(*inputs).double()
        ref = copy.deepcopy(program).double()(*(x.double() for x in inputs))
        error = ((got - ref).abs().max() / ref.abs().max()).item()
        warm = []
        for _ in range(calls):
            start = time.perf_counter()
            function(*inputs)
            warm.append(time.perf_counter() - start)
    bench, cold = bench_compile.Compile(), []
    for _ in range(compiles):
        bench.setup(name, seq)
        start = time.process_time()
        bench.time_compile(name, seq)
        cold.append(time.process_time() - start)
    out[name] = {"max_rel_error": error, "compile_s": statistics.median(cold),
                 "warm_call_s": statistics.median(warm)}
print(json.dumps(out))
"""

# A benchmark's first compile in a fresh process, imports and probe before the clock or not.
FIRST_COMPILE = """
import sys, time
sys.path.insert(0, ".")
import torch
from benchmarks import workloads
name, seq, preimport = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
if preimport:  # what benchmarks/compiled.py has the forkserver do once a commit
    from torch._inductor import compile_fx  # noqa: F401
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    pick_vec_isa()
from inductor_example import backend
torch.set_num_threads(1)
program, inputs = workloads.build(name, seq)
start = time.perf_counter()
with torch.no_grad():
    torch.compile(program, backend=backend.compile_with_defaults, dynamic=False)(*inputs)
print(time.perf_counter() - start)
"""


def run_child(code: str, args: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    """A fresh Python process running `code`; its standard output, or exit with its error."""
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        sys.exit(f"a measuring process failed in {cwd} (exit {done.returncode}):\n"
                 f"{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def injection_rows(records: list, figures: list[dict]) -> list[str]:
    """Each injection against the commit before it: `name | gated before -> after | MLP ...`
    in its kind's figure."""
    from regressions.groundtruth.inductor_history import INJECTIONS

    figure = {"numerics": ("max_rel_error", "{:.2g}"), "compile_time": ("compile_s", "{:.2f} s"),
              "host_time": ("warm_call_s", "{:.1f} ms")}
    rows = []
    for i, record in enumerate(records):
        if record.injection is None or i == 0:
            continue
        key, form = figure[INJECTIONS[record.injection].kind]
        scale = 1000 if key == "warm_call_s" else 1

        def shown(at: dict, name: str, key: str = key, form: str = form, scale: int = scale
                  ) -> str:
            return form.format(at[name][key] * scale)

        rows.append(f"| `{record.injection}` | {INJECTIONS[record.injection].kind} | "
                    f"{shown(figures[i - 1], 'gated')} -> {shown(figures[i], 'gated')} | "
                    f"{shown(figures[i - 1], 'mlp')} -> {shown(figures[i], 'mlp')} |")
    return rows


def injections(args: argparse.Namespace) -> None:
    from regressions.groundtruth import scratch
    from regressions.groundtruth.inductor_history import PLAN, PROJECT

    plan = PLAN[:args.commits - 1] if args.commits else PLAN
    with tempfile.TemporaryDirectory(prefix="inductor-costs-") as folder:
        repo = Path(folder) / "history"
        records = scratch.build(repo, plan, source=ROOT, project=PROJECT)  # this tree's example
        cache = {"TORCHINDUCTOR_CACHE_DIR": str(Path(folder) / "inductor-cache")}
        figures = []
        print("| commit | gated: error, compile, warm call | MLP: error, compile, warm call |")
        print("|---|---|---|")
        for record in records:
            subprocess.run(["git", "checkout", "--quiet", record.sha], cwd=repo, check=True)
            at = json.loads(run_child(MEASURE_COMMIT, [str(SEQ), str(args.compiles),
                                                       str(args.calls)], cwd=repo, env=cache))
            figures.append(at)
            cells = [f"{at[n]['max_rel_error']:.2g}, {at[n]['compile_s']:.2f} s, "
                     f"{at[n]['warm_call_s'] * 1000:.1f} ms" for n in ("gated", "mlp")]
            print(f"| {record.sha[:8]} {record.subject} | {cells[0]} | {cells[1]} |", flush=True)
        print("\n| injection | kind | gated (w 2048) | MLP (w 512) |\n|---|---|---|---|")
        print("\n".join(injection_rows(records, figures)))


def first_compile(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="inductor-first-") as folder:
        env = {"TORCHINDUCTOR_CACHE_DIR": str(Path(folder) / "inductor-cache")}
        run_child(FIRST_COMPILE, [args.workload, str(SEQ), "1"], cwd=EXAMPLE, env=env)  # cache
        for preimport, label in (("0", "without the forkserver's imports"),
                                 ("1", "with them (imports and probe before the clock)")):
            seconds = [float(run_child(FIRST_COMPILE, [args.workload, str(SEQ), preimport],
                                       cwd=EXAMPLE, env=env)) for _ in range(args.processes)]
            print(f"{args.workload} seq {SEQ}, first compile {label}: "
                  + ", ".join(f"{s:.1f}" for s in seconds) + f" s ({args.processes} processes)")


def captures(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_inductor_capture import CAPTURE_SCRIPT

    with tempfile.TemporaryDirectory(prefix="inductor-captures-") as folder:
        root = Path(folder)
        env = {"TORCHINDUCTOR_CACHE_DIR": str(root / "inductor-cache")}
        texts = []
        for n, label in enumerate(("fresh kernel cache", "warm", "warm"), start=1):
            start = time.perf_counter()
            out = run_child(CAPTURE_SCRIPT, [str(root / f"c{n}"), "{}"], cwd=ROOT,
                            env={**env, "PYTHONHASHSEED": str(n)})
            wall = time.perf_counter() - start
            capture = Path(out)
            index = json.loads((capture / "stages.json").read_text())
            codegen = next(s["wall_s"] for s in index["stages"] if s["name"] == "codegen")
            texts.append({p.name: p.read_bytes() for p in sorted(capture.glob("[0-9]-*.txt"))})
            print(f"capture {n} ({label}): {wall:.1f} s wall, codegen stage {codegen:.1f} s")
        same = all(t == texts[0] for t in texts[1:])
        print(f"the six stage texts byte-identical in all three: {'yes' if same else 'NO'} "
              f"({len(texts[0])} files)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("injections", help="every commit of the planted history")
    one.add_argument("--compiles", type=int, default=5, help="cold compiles a median")
    one.add_argument("--calls", type=int, default=10, help="warm calls a median")
    one.add_argument("--commits", type=int, help="only the first N commits of the history")
    two = commands.add_parser("first-compile", help="fresh processes, imports first or not")
    two.add_argument("--processes", type=int, default=2)
    two.add_argument("--workload", default="mlp", choices=("mlp", "gated"))
    commands.add_parser("captures", help="three captures of the small MLP, one cache root")
    args = parser.parse_args(argv)
    {"injections": injections, "first-compile": first_compile,
     "captures": captures}[args.command](args)


if __name__ == "__main__":
    main()
