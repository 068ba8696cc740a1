"""torch-spyre's modelled device time on the suite's grid, beside spyre_sim's program for the
same workloads: the figures docs/measurements/torch-spyre.md shows.

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
launch and per call; the format is MEASURED_VERSION's, docs/measurements/torch-spyre.md).
`--render` also splits each point's device time, in both programs, into launches x launch gap,
kernels, copies and fallbacks (`time_terms`, from each run's timeline), and lists every
kernel's cost terms beside the SDSC fields it was priced from (`sdsc_cells`: `N_`, work slices,
cores, each tensor's bytes in DRAM or LX) or spyre_sim's own kernel work.
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
DMA_TID = 100  # spyre_sim.timeline's DMA thread (core threads are 0..cores-1)
# a kernel's cost terms in its trace arguments (spyre_sim.cost.KernelCost), as the tables name
PARTS = {"compute_us": "PE us", "vector_us": "vector us", "memory_us": "DRAM us",
         "psum_us": "psum us", "relayout_us": "restickify us"}
# where `--knobs` looks for the stage a knob's decision shows in first (a stage capture of
# the default and of each choice): the workloads with matmuls, softmax and restickifies
STAGE_POINTS = (("mlp", 512), ("attention", 512))

CHILD = """
import dataclasses, importlib.util, json, math, sys, time
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
    fields = {e.name: {**dataclasses.asdict(e.op), "repeats": e.repeats}
              for ex in compiled.program.kernels.values() for e in ex if e.op is not None}
    timeline = [e for e in run.trace["traceEvents"]  # the script's compact_trace
                if e.get("ph") == "X" and e.get("tid") in (0, 100)]
    print("RESULT " + json.dumps({
        **job, "device_us": run.device_us, "kernels": kernels, "unmodelled": run.unmodelled,
        "sdsc": fields, "timeline": timeline,
        "compile_s": compiled_s, "read_s": read_seconds[-1], "price_s": price_s,
        "own_model": None if report is None else {
            "total_us": report.total_us,
            "groups": [{"ops": g.op_names, "predicted_us": g.predicted_us}
                       for g in report.groups]}}), flush=True)
"""


def torch_spyre_points(checkout: Path, jobs: list[dict]) -> list[dict]:
    """`jobs` compiled and priced in one child process with `checkout` on its path."""
    env = {"PYTHONPATH": os.pathsep.join((str(checkout), str(ROOT))),  # this tree's spyre_sim
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
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
    import cbor2

    import spyre_sim
    from spyre_sim.cost import KernelWork, kernel_cost

    program, inputs = workloads.build(name, seq)
    compiled = spyre_sim.compile(program, inputs,
                                 spyre_sim.Config(numerics=False, noise_cv=0.0))
    result = compiled.run(*inputs)
    splits = {e["name"]: e["args"].get("split", {}) for e in result.trace["traceEvents"]
              if e.get("cat") == "kernel" and e.get("tid") == 0}
    work = {step["kernel"]["name"]: step["kernel"]["work"] for graph in compiled.graphs
            for step in cbor2.loads(graph.artifacts["backend"].payload)["steps"]
            if step["type"] == "compute"}
    costs = {name: kernel_cost(KernelWork.from_dict(w), compiled.config.device)
             for name, w in work.items()}
    return {"device_us": result.device_time_us, "kernels": [
        {"name": k.name, "cores": k.cores, "splits": sorted(splits.get(k.name, {}).items()),
         "bytes": k.bytes, "time_us": k.time_us, "bound": k.bound} for k in result.kernels],
        "timeline": compact_trace(result.trace), "work": work,
        "parts": {name: {part: getattr(c, part) for part in PARTS} for name, c in costs.items()}}


def compact_trace(trace: dict) -> list[dict]:
    """A run's timeline without the per-core copies of each kernel: its complete events on
    core 0 (the kernels), the DMA thread (copies) and the host (launches, fallbacks)."""
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"
            and e.get("tid") in (0, DMA_TID)]


def time_terms(events: list[dict]) -> dict[str, float]:
    """Where a call's device time goes: kernel launches (how many, their gaps), the kernels
    (how many executions, their time), host<->device copies and CPU fallback ops. They add up
    to the device time: the timeline lays them end to end (spyre_sim.timeline.run_record)."""
    def total(*categories: str) -> float:
        return sum(e["dur"] for e in events if e.get("cat") in categories
                   and (e["cat"] != "kernel" or e.get("tid") == 0))

    terms = {"launches": float(sum(e.get("cat") == "launch" for e in events)),
             "launch_us": total("launch"),
             "kernels": float(sum(e.get("cat") == "kernel" and e.get("tid") == 0
                                  for e in events)),
             "kernel_us": total("kernel"), "transfer_us": total("d2h", "h2d"),
             "fallback_us": total("fallback")}
    terms["device_us"] = sum(terms[k] for k in ("launch_us", "kernel_us", "transfer_us",
                                                 "fallback_us"))
    return terms


def kernel_parts(events: list[dict]) -> dict[str, dict[str, float]]:
    """Each kernel's cost terms as the cost model gave them (its trace arguments): PE array,
    vector unit, DRAM, K-split partial sums and restickify time, before they overlap."""
    return {e["name"]: {part: e["args"][part] for part in PARTS if part in e["args"]}
            for e in events if e.get("cat") == "kernel" and e.get("tid") == 0}


def sdsc_cells(fields: dict) -> tuple[str, str, str, str]:
    """An SDSC execution's iteration space (`N_`), its work slices per dim and cores
    (`numWkSlicesPerDim_`, `numCoresUsed_`) and its tensors in DRAM and in LX (the
    `component_` of their `scheduleTree_` allocate nodes), each as r (read) or w (written),
    its extents per dim and its bytes (`wordLength` times the extents)."""
    def shape(extents: list) -> str:
        return " ".join(f"{dim}{size}" for dim, size in extents)

    def tensors(memory: str) -> str:
        return ", ".join(f"{'w' if t['output'] else 'r'} {shape(t['extents'])} = "
                         f"{math.prod(n for _, n in t['extents']) * t['word_bytes']}"
                         for t in fields["tensors"] if t["memory"] == memory) or "-"

    return (shape(fields["dims"]), f"{shape(fields['splits'])}, {fields['cores']} cores",
            tensors("hbm"), tensors("lx"))


def time_by_op(point: dict) -> list[tuple[str, int, float]]:
    """torch-spyre's modelled kernel time per op, largest first: (op, executions, us)."""
    found: dict[str, list[float]] = {}
    for kernel in point["kernels"]:
        if kernel["time_us"] is not None:
            found.setdefault(kernel["op"], []).append(kernel["time_us"])
    return sorted(((op, len(times), sum(times)) for op, times in found.items()),
                  key=lambda row: -row[2])


def decomposition_lines(point: dict, sim: dict) -> list[str]:
    """Both programs' device time split into launch gaps, kernels, copies and fallbacks,
    their difference, and each kernel's cost terms beside the SDSC fields (torch-spyre) or
    the kernel's work (spyre_sim) they come from."""
    sides = (("torch-spyre", time_terms(point["timeline"])),
             ("spyre_sim", time_terms(sim["timeline"])))
    lines = ["", f"#### {point['workload']}, seq {point['seq']}: where the time goes", "",
             "| compiler | launches x launch gap = us | kernel executions | kernel us | "
             "copies us | CPU fallbacks us | device us |", "|---|---|---|---|---|---|---|"]
    for who, t in sides:
        gap = t["launch_us"] / t["launches"] if t["launches"] else 0.0
        lines.append(f"| {who} | {t['launches']:.0f} x {gap:.2f} = {t['launch_us']:.2f} | "
                     f"{t['kernels']:.0f} | {t['kernel_us']:.2f} | {t['transfer_us']:.2f} | "
                     f"{t['fallback_us']:.2f} | {t['device_us']:.2f} |")
    (_, ts), (_, ss) = sides
    lines.append(f"| torch-spyre - spyre_sim | {ts['launches'] - ss['launches']:+.0f} launches "
                 f"= {ts['launch_us'] - ss['launch_us']:+.2f} | "
                 f"{ts['kernels'] - ss['kernels']:+.0f} | "
                 f"{ts['kernel_us'] - ss['kernel_us']:+.2f} | "
                 f"{ts['transfer_us'] - ss['transfer_us']:+.2f} | "
                 f"{ts['fallback_us'] - ss['fallback_us']:+.2f} | "
                 f"{ts['device_us'] - ss['device_us']:+.2f} |")
    lines += ["", "torch-spyre's kernel time by op: " + ", ".join(
        f"{op} {n} = {us:.2f}" for op, n, us in time_by_op(point)), "",
        "| compiler | kernel | " + " | ".join(PARTS.values()) + " | us | runs | iteration "
        "space | slices per dim, cores | DRAM tensors (bytes) | LX tensors (bytes) |",
        "|---|---|" + "---|" * (len(PARTS) + 6)]
    for who, kernels, parts in (("torch-spyre", point["kernels"],
                                 kernel_parts(point["timeline"])),
                                ("spyre_sim", sim["kernels"], sim.get("parts", {}))):
        for k in kernels:
            terms = parts.get(k["name"], {})
            cells = " | ".join(f"{terms[p]:.2f}" if p in terms else "-" for p in PARTS)
            if who == "torch-spyre":
                fields = point.get("sdsc", {}).get(k["name"])
                space, slices, hbm, lx = sdsc_cells(fields) if fields else ("-",) * 4
                runs = str(fields["repeats"]) if fields else "-"
            else:
                work = sim.get("work", {}).get(k["name"], {})
                space = " ".join(f"{d}{n}" for d, n in work.get("dims", [])) or "-"
                slices = (" ".join(f"{d}{n}" for d, n in work["splits"])
                          + f", {work['cores_used']} cores" if work else "-")
                hbm = (f"r {work['hbm_read_bytes']}, w {work['hbm_write_bytes']}"
                       if work else "-")
                lx, runs = "-", "1"
            lines.append(f"| {who} | {k['name'].rpartition('/')[2]} | {cells} | "
                         f"{_us(k['time_us'])} | {runs} | {space} | {slices} | {hbm} | {lx} |")
    return lines


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
        if "timeline" in p and "timeline" in sim:
            lines += decomposition_lines(p, sim)
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
    return lines if len(lines) > 5 else []


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
