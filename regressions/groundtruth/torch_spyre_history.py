"""Known regressions and decoys planted on torch-spyre's own history: the ground truth for
running the nightly on the compiler the tool's users ship.

A scratch history clones a torch-spyre checkout (CI's copy of its public history, or a
user's) and commits each planted change on top of its newest commit, an hour apart after it.
The edits are written against the public history's newest commit (upstream b5a208d8,
2026-08-20); each must match exactly once, so a checkout where the code moved fails loudly.

The injections, each first visible at one stage of torch-spyre's pipeline
(backends/torch_spyre.py): a pre-scheduling pass made quadratic in the graph's operations
(as torch-spyre #4459 found `coarse_tile_pre_stickify` re-deriving every op's read-writes),
a work division that gives matmuls a quarter of the cores (the SDSC changes, and the device
time spyre_sim's model gives it), a stick optimizer that keeps the costlier of two equivalent
layout choices (restickify kernels appear where an op could take either stick; the greedy
optimizer, `global_stick_optimizer` off, works around it), and a lowering that breaks the
compile of the one workload that uses it. The decoys: a change to provenance text only (the
SDSC's `debug_handle_`, which canonical texts leave out) and a docs change; the end-to-end
test's `PLAN` commits the first.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from regressions import git
from regressions.errors import SpyreRegressError
from regressions.groundtruth import scratch
from regressions.groundtruth.scenarios import Edit, Injection

INJECTIONS: dict[str, Injection] = {i.name: i for i in (
    Injection(
        name="quadratic_span_reduction", kind="compile_time", stage="span_reduction",
        subject="work division: check every op's spans against each producer's reads",
        description="span_reduction re-derives the read-writes of both buffers of every pair "
                    "of computed buffers, the producer's once per read of the other (uncached "
                    "`get_read_writes`, sympy dependency extraction each time): quadratic in "
                    "the graph's operations, in one pass. Nothing it decides changes, so only "
                    "the pass's time shows it, and it grows with the graph.",
        edits=(Edit("torch_spyre/_inductor/work_division.py",
                    '    """Pass 1: compute minimum per-op splits required by MAX_SPAN_BYTES."""\n'
                    "    operations = graph.operations\n",
                    '    """Pass 1: compute minimum per-op splits required by MAX_SPAN_BYTES."""\n'
                    "    operations = graph.operations\n"
                    "    computed = list(_iter_computed_buffers(operations))\n"
                    "    for op in computed:  # a producer's span must cover its consumers' reads\n"
                    "        for producer in computed:\n"
                    "            shared = [dep for dep in op.get_read_writes().reads\n"
                    "                      if dep.name in {d.name for d in\n"
                    "                                      producer.get_read_writes().writes}]\n"),
               ),
        workaround=None, probe=("stack_2", 128)),
    Injection(
        name="silu_loader", kind="failure", stage="lowering",
        subject="lowering: silu reads its input through the loader directly",
        description="The silu lowering calls its input's loader factory with the index instead of "
                    "the loader it makes: every graph with a silu (the SwiGLU MLP) fails to "
                    "compile, with a TypeError raised while Inductor lowers it; the others "
                    "compile as before.",
        edits=(Edit("torch_spyre/_inductor/lowering.py",
                    "torch.ops.spyre.silu.__name__)(\n            x.make_loader()(index)\n",
                    "torch.ops.spyre.silu.__name__)(\n            x.make_loader(index)\n"),),
        workaround=None, probe=("swiglu", 128)),
    Injection(
        name="quarter_cores_matmul", kind="device_time", stage="_distribute_work",
        subject="work division: price matmul splits for a quarter of the cores",
        description="cost_model_matmul_division prices each matmul's split for a quarter of "
                    "the cores it may use: the matmuls of every program run on 8 of 32 cores "
                    "(the SDSC's numCoresUsed_ and numWkSlicesPerDim_ change), so the device "
                    "program is slower; the compile itself is not.",
        edits=(Edit("torch_spyre/_inductor/work_division.py",
                    "        if _cost_model_divide_op(op, max_cores):\n",
                    "        if _cost_model_divide_op(op, max(1, max_cores // 4)):\n"),),
        workaround=None, probe=("mlp", 128)),
    Injection(
        name="costliest_stick_state", kind="device_time", stage="finalize_layouts",
        subject="stick optimizer: keep the costlier of two equivalent beam states",
        description="The stick optimizer's liveness merge keeps, of the beam states whose "
                    "live buffers agree, the costlier instead of the cheaper (`>` for `<`): "
                    "where an op may take either stick, it takes the one that needs "
                    "restickifies. SwiGLU's gate x up product takes its stick on the rows: "
                    "three ReStickifyOpHBM kernels, on both operands and on the product the "
                    "down projection reads (it needs K on the stick). A graph with one layout "
                    "per op (the MLP) is unchanged. optimize_restickify_locations decides it "
                    "but keeps its choice beside the IR (`committed_stl`), so finalize_layouts "
                    "is the first pass whose IR shows it; the greedy optimizer "
                    "(global_stick_optimizer off) chooses as before.",
        edits=(Edit("torch_spyre/_inductor/optimize_restickify.py",
                    "            if key not in canon or s.lower_bound < canon[key]"
                    ".lower_bound:\n",
                    "            if key not in canon or s.lower_bound > canon[key]"
                    ".lower_bound:\n"),),
        workaround="global_stick_optimizer", probe=("swiglu", 128)),
)}

# Decoys, in the order a history applies them.
BENIGN: tuple[tuple[str, Edit], ...] = (
    ("provenance: tag each IR chain entry with the IR it came from",
     Edit("torch_spyre/_inductor/op_spec.py",
          '"ir_chain": list(self.ir_chain),',
          '"ir_chain": [f"ir:{name}" for name in self.ir_chain],')),
    ("docs: say that the compiler's front half runs without a card",
     Edit("README.md", "# Torch Spyre Device Enablement\n",
          "# Torch Spyre Device Enablement\n\nThe compiler's front half (Dynamo to SDSC) is "
          "Python and can be tried without a card.\n")),
)

PROJECT = scratch.Project("torch-spyre", (), "", INJECTIONS, benign=BENIGN)
# The history the end-to-end test runs the nightly on, after the checkout's newest commit:
# the provenance decoy, the slower matmuls, the quadratic pass, the restickifying layout
# choice, the broken lowering. (The docs decoy stays in BENIGN for a longer plan.)
PLAN: list[str | None] = [None, "quarter_cores_matmul", "quadratic_span_reduction",
                          "costliest_stick_state", "silu_loader"]


def build(dest: Path, checkout: Path, plan: list[str | None] = PLAN,
          ref: str = "HEAD") -> list[scratch.CommitRecord]:
    """A clone of `checkout` at `ref` in `dest`, with `plan` committed on top (as
    `scratch.build` reads a plan); the records of `ref` and of each planted commit."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise SpyreRegressError(f"{dest} exists and is not empty; choose a new directory")
    git.check_repository(checkout)
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(checkout), str(dest)],
                   check=True, capture_output=True)
    base = git.resolve(dest, ref)
    subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", "-B", "main", base],
                   check=True, capture_output=True)
    start = int(git.commit_info(dest, base).date.timestamp())
    first = scratch.CommitRecord(base, git.commit_info(dest, base).subject, None)
    return [first, *scratch.commit_plan(dest, plan, PROJECT, start)]
