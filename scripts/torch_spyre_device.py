"""torch-spyre's modelled device time on the suite's grid, beside spyre_sim's program for the
same workloads: the figures docs/torch-spyre-device-time.md shows.

    python scripts/torch_spyre_device.py --checkout PATH --out FILE.json [--knobs] [--stacks]
                                         [--points WORKLOAD-SEQ,...]
    python scripts/torch_spyre_device.py --render FILE.json     # the docs' tables, markdown
    python scripts/torch_spyre_device.py --render FILE.json --measured MEASURED.json

For every workload and size of the torch-spyre suite's grid (`suites/torch_spyre`), one child
process with the checkout on its path compiles the program through torch-spyre (the backend
module loaded by path, as a probe does) and prices the device program it wrote with
spyre_sim's timing model: every kernel row, the device time, the seconds the reading and the
pricing took. Where the checkout has torch-spyre's own analytical cost model
(`torch_spyre/_inductor/cost_model.py`, PR #3572; its `config.cost_model` setting), the same
compile reports its prediction too, untuned. This process compiles the same programs with
spyre_sim and prices them with the same model (noise off). `--knobs` adds a compile per
torch-spyre knob (the backend's KNOB_TABLE) and non-default choice: its modelled device time
against the default's. `--measured` puts a card's figures beside the model's (per kernel
launch and per call; the format is MEASURED_VERSION's, docs/torch-spyre-device-time.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from backends import interface

ROOT = Path(__file__).resolve().parents[1]
BACKEND = ROOT / "backends" / "torch_spyre.py"
CATALOGUE = ROOT / "suites" / "torch_spyre" / "benchmarks" / "workloads.py"
VERSION = 1  # the output document
MEASURED_VERSION = 1  # a card's figures: {"version", "commit", "points": {"<w>-<seq>":
# {"device_us": per call, "kernels": {"<kernel launched>": us per launch}}}}
# torch-spyre settings tried beside the backend's KNOB_TABLE (`--knobs`), each with the choices
# to try: decisions of its config (torch_spyre/_inductor/config.py) the table does not hold
CANDIDATES = (
    ("co_optimizing_lx_planning", "", (True,)),
    ("lx_planner_relayout", "", (False,)),
    ("ignore_span_overflow_hints", "", (False,)),
    ("core_id_k_fast_emission", "", (False,)),
    ("layout_solver", "", ("bestfit", "firstfit")),
)
# where `--knobs` looks for the stage a knob's decision shows in first (a stage capture of
# the default and of each choice): the workloads with matmuls, softmax and restickifies
STAGE_POINTS = (("mlp", 512), ("attention", 512))

CHILD = """
import importlib.util, json, math, sys, time
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
backend = load("torch_spyre_backend", sys.argv[1])
workloads = load("workloads", sys.argv[2])
backend.load_compiler()
sdsc = backend.companion("torch_spyre_sdsc")
read_seconds = []
original_read = sdsc.Collector.read
def timed_read(self):
    start = time.perf_counter()
    original_read(self)
    read_seconds.append(time.perf_counter() - start)
sdsc.Collector.read = timed_read
from torch_spyre._inductor import config as ts_config
own = "cost_model" in ts_config.get_config_copy()
if own:
    from torch_spyre._inductor import cost_model_pass
defaults = ts_config.get_config_copy()
for job in json.loads(sys.stdin.read()):
    values = dict(job["values"])
    if any(name not in defaults or defaults[name] == value for name, value in values.items()):
        print("RESULT " + json.dumps({**job, "skipped": "the default, or no such setting"}),
              flush=True)
        continue
    if own:
        values["cost_model"] = "1"
    if job.get("capture"):
        import hashlib, tempfile
        from pathlib import Path
        with tempfile.TemporaryDirectory() as folder:
            try:
                written = backend.capture(*workloads.build(job["workload"], job["seq"]),
                                          job["values"], Path(folder))
            except backend.CompileFailure as failure:
                print("RESULT " + json.dumps({**job, "failure": str(failure)}), flush=True)
                continue
            stages = json.loads((written / "stages.json").read_text())["stages"]
            digests = {s["name"]: hashlib.sha256((written / s["file"]).read_bytes()
                                                 ).hexdigest()[:16] for s in stages}
        print("RESULT " + json.dumps({**job, "digests": digests}), flush=True)
        continue
    start = time.perf_counter()
    try:
        compiled = backend.compile(*workloads.build(job["workload"], job["seq"]), values)
    except backend.CompileFailure as failure:
        print("RESULT " + json.dumps({**job, "failure": str(failure)}), flush=True)
        continue
    compiled_s = time.perf_counter() - start
    report = cost_model_pass.LAST_REPORT if own else None
    start = time.perf_counter()
    run = compiled.run()
    price_s = time.perf_counter() - start
    kernels = [{"name": k.name, "op": k.op, "cores": k.cores, "splits": k.splits,
                "bytes": k.bytes, "time_us": None if math.isnan(k.time_us) else k.time_us,
                "bound": k.bound, "repeats": k.repeats, "reason": k.reason}
               for k in run.kernels]
    print("RESULT " + json.dumps({
        **job, "device_us": run.device_us, "kernels": kernels, "unmodelled": run.unmodelled,
        "compile_s": compiled_s, "read_s": read_seconds[-1], "price_s": price_s,
        "own_model": None if report is None else {
            "total_us": report.total_us,
            "groups": [{"ops": g.op_names, "predicted_us": g.predicted_us}
                       for g in report.groups]}}), flush=True)
"""


def torch_spyre_points(checkout: Path, jobs: list[dict]) -> list[dict]:
    """`jobs` compiled and priced in one child process with `checkout` on its path."""
    env = {"PYTHONPATH": str(checkout), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "OMP_NUM_THREADS": "1", "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run([sys.executable, "-c", CHILD, str(BACKEND), str(CATALOGUE)],
                          input=json.dumps(jobs), capture_output=True, text=True, env=env,
                          timeout=3600)
    found = [json.loads(line[7:]) for line in done.stdout.splitlines()
             if line.startswith("RESULT ")]
    if done.returncode != 0 or len(found) != len(jobs):
        sys.exit(f"the torch-spyre child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return found


def spyre_sim_point(workloads: Any, name: str, seq: int) -> dict:
    """The same program through spyre_sim, priced by the same model (noise and numerics
    off): each kernel's op, cores, split, bytes and time."""
    import spyre_sim

    program, inputs = workloads.build(name, seq)
    result = spyre_sim.compile(program, inputs, spyre_sim.Config(numerics=False, noise_cv=0.0)
                               ).run(*inputs)
    splits = {e["name"]: e["args"].get("split", {}) for e in result.trace["traceEvents"]
              if e.get("cat") == "kernel" and e.get("tid") == 0}
    return {"device_us": result.device_time_us, "kernels": [
        {"name": k.name, "cores": k.cores, "splits": sorted(splits.get(k.name, {}).items()),
         "bytes": k.bytes, "time_us": k.time_us, "bound": k.bound} for k in result.kernels]}


def knob_jobs(points: list[tuple[str, int]], captures: bool = True) -> list[dict]:
    """A job per point and non-default choice of every knob the checkout has; with
    `captures`, a stage capture per choice at STAGE_POINTS too."""
    table = _knob_table() + list(CANDIDATES)  # as text: no torch-spyre on this path
    runs = [{"workload": w, "seq": s, "values": {name: choice}, "knob": name}
            for name, _stage, choices in table for choice in choices for w, s in points]
    settings: list[dict[str, Any]] = [{}] + [{name: c} for name, _, choices in table
                                             for c in choices]
    return runs + [{"workload": w, "seq": s, "values": values, "capture": True}
                   for w, s in STAGE_POINTS for values in settings if captures]


def _knob_table() -> list[tuple[str, str, tuple]]:
    import ast

    for node in ast.parse(BACKEND.read_text()).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "KNOB_TABLE":
            return list(ast.literal_eval(node.value))  # type: ignore[arg-type]
    raise SystemExit("backends/torch_spyre.py has no KNOB_TABLE")


def measure(args: argparse.Namespace) -> dict:
    workloads = interface.load_file("workloads_catalogue", CATALOGUE)
    points = [(w, s) for w in workloads.SUITE for s in workloads.SEQ_LENGTHS
              if not args.points or f"{w}-{s}" in args.points.split(",")]
    stacks = [(w, workloads.SEQ_LENGTHS[0]) for w in workloads.STACKS] if args.stacks else []
    jobs = [{"workload": w, "seq": s, "values": {}} for w, s in points + stacks]
    if args.knobs:
        jobs += knob_jobs(points, captures=not args.points)
    measured = torch_spyre_points(args.checkout, jobs)
    commit = subprocess.run(["git", "-C", str(args.checkout), "rev-parse", "--short=8",
                             "HEAD"], capture_output=True, text=True).stdout.strip()
    sim = {f"{w}-{s}": spyre_sim_point(workloads, w, s) for w, s in points + stacks}
    return {"version": VERSION, "commit": commit, "torch_spyre": measured, "spyre_sim": sim}


def _us(value: float | None) -> str:
    return "unmodelled" if value is None or math.isnan(value) else f"{value:.2f}"


def render(document: dict) -> str:
    """Markdown: the summary per point, each point's kernels in both programs, the knobs."""
    base = [p for p in document["torch_spyre"] if not p["values"] and not p.get("capture")]
    lines = [f"torch-spyre at {document['commit']}: modelled device time per call (us)", "",
             "| workload | seq | torch-spyre kernels | unmodelled | torch-spyre us | its kernels "
             "alone | torch-spyre's own model | spyre_sim kernels | spyre_sim us | ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for p in base:
        sim = document["spyre_sim"][f"{p['workload']}-{p['seq']}"]
        if "device_us" not in p:
            lines.append(f"| {p['workload']} | {p['seq']} | failed: {p.get('failure')} |")
            continue
        alone = sum(k["time_us"] or 0.0 for k in p["kernels"])
        own = "-" if not p.get("own_model") else f"{p['own_model']['total_us']:.2f}"
        lines.append(f"| {p['workload']} | {p['seq']} | {len(p['kernels'])} | "
                     f"{p['unmodelled']} | {p['device_us']:.2f} | {alone:.2f} | {own} | "
                     f"{len(sim['kernels'])} | {sim['device_us']:.2f} | "
                     f"{p['device_us'] / sim['device_us']:.2f} |")
    for p in base:
        sim = document["spyre_sim"][f"{p['workload']}-{p['seq']}"]
        lines += ["", f"### {p['workload']}, seq {p['seq']}", "",
                  "| compiler | kernel | cores | splits | bytes | us | bound |",
                  "|---|---|---|---|---|---|---|"]
        for who, kernels in (("torch-spyre", p.get("kernels", [])), ("spyre_sim",
                                                                    sim["kernels"])):
            lines += [f"| {who} | {k['name']} | {k['cores']} | "
                      f"{' '.join(f'{d}{n}' for d, n in k['splits'] if n > 1) or '-'} | "
                      f"{k['bytes']} | {_us(k['time_us'])} | {k['bound']} |" for k in kernels]
    knobs = [p for p in document["torch_spyre"] if p["values"] and "skipped" not in p
             and not p.get("capture")]
    if knobs:
        lines += ["", "### knobs: modelled device time against the default", "",
                  "| knob | value | workload | seq | default us | with the knob us | ratio |",
                  "|---|---|---|---|---|---|---|"]
        default = {(p["workload"], p["seq"]): p.get("device_us") for p in base}
        for p in knobs:
            ((name, value),) = p["values"].items()
            was, now = default.get((p["workload"], p["seq"])), p.get("device_us")
            ratio = f"{now / was:.3f}" if was and now else p.get("failure", "-")[:60]
            lines.append(f"| {name} | {value} | {p['workload']} | {p['seq']} | {_us(was)} | "
                         f"{_us(now)} | {ratio} |")
    return "\n".join(lines + _stage_lines(document)) + "\n"


def _stage_lines(document: dict) -> list[str]:
    """Per knob choice and capture point, the first stage whose text differs from the
    default's (in the capture's stage order)."""
    captures = [p for p in document["torch_spyre"] if p.get("capture") and "digests" in p]
    default = {(p["workload"], p["seq"]): p["digests"] for p in captures if not p["values"]}
    lines = ["", "### knobs: the first stage whose text differs from the default's", "",
             "| knob | value | workload | seq | first divergent stage |", "|---|---|---|---|---|"]
    for p in captures:
        if not p["values"] or (p["workload"], p["seq"]) not in default:
            continue
        ((name, value),) = p["values"].items()
        base = default[(p["workload"], p["seq"])]
        first = next((s for s in base if p["digests"].get(s) != base[s]), "none")
        lines.append(f"| {name} | {value} | {p['workload']} | {p['seq']} | {first} |")
    return lines if len(lines) > 4 else []


def kernel_launches(point: dict) -> dict[str, float | None]:
    """The model's time per kernel launch (its SDSC executions summed, no launch gap): what a
    card's profiler reports per compiled kernel; None where one of them is unmodelled."""
    launches: dict[str, float | None] = {}
    for kernel in point["kernels"]:  # an unmodelled row's reason starts with its place
        where = kernel["reason"].partition(": ")[0] if kernel["reason"] else kernel["name"]
        name = where.rpartition("/")[0] or where
        was = launches.get(name, 0.0)
        launches[name] = None if was is None or kernel["time_us"] is None else \
            was + kernel["time_us"]
    return launches


def measured_lines(document: dict, measured: dict) -> list[str]:
    """Model against a card, per kernel launch and per call, with the model's error."""
    if measured.get("version") != MEASURED_VERSION:
        raise SystemExit(f"measured figures of version {measured.get('version')!r}; this "
                         f"script reads version {MEASURED_VERSION}")
    lines = ["", f"### the model against a card (measured at {measured.get('commit', '?')})",
             "", "| workload | seq | kernel | model us | measured us | model error |",
             "|---|---|---|---|---|---|"]
    for p in document["torch_spyre"]:
        card = measured["points"].get(f"{p['workload']}-{p['seq']}")
        if p["values"] or p.get("capture") or card is None or "kernels" not in p:
            continue
        rows = [(k, v, card["kernels"].get(k)) for k, v in kernel_launches(p).items()]
        rows.append(("per call", p["device_us"], card.get("device_us")))
        for kernel, model, real in rows:
            error = f"{model / real - 1:+.1%}" if model and real else "-"
            lines.append(f"| {p['workload']} | {p['seq']} | {kernel} | {_us(model)} | "
                         f"{_us(real)} | {error} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, help="a torch-spyre checkout")
    parser.add_argument("--out", type=Path, help="where the JSON document goes")
    parser.add_argument("--knobs", action="store_true", help="every knob's choices too")
    parser.add_argument("--stacks", action="store_true", help="the graph-size axis too")
    parser.add_argument("--points", help="only these grid points (mlp-128,attention-512)")
    parser.add_argument("--render", type=Path, help="print a document's tables as markdown")
    parser.add_argument("--measured", type=Path, help="a card's figures, beside the model's")
    args = parser.parse_args(argv)
    if args.render:
        document = json.loads(args.render.read_text())
        extra = (measured_lines(document, json.loads(args.measured.read_text()))
                 if args.measured else [])
        print(render(document) + "\n".join(extra) + ("\n" if extra else ""), end="")
        return 0
    if not (args.checkout and args.out):
        parser.error("--checkout and --out are needed (or --render FILE)")
    args.out.write_text(json.dumps(measure(args), indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
