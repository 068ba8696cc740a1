"""Known regressions and harmless changes, as source edits: the ground truth for the demo and
the end-to-end tests (ruptures ships its generators with the package for the same reason).

Each `Injection` is a small, plausible commit to spyre_sim that makes one thing worse: one
stage, one symptom. Each `Edit` must match exactly once in the tree it is applied to, so a
refactor that moves the code breaks the scenario loudly instead of silently doing nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from regressions.errors import SpyreRegressError
from regressions.metrics import Kind


@dataclass(frozen=True)
class Edit:
    path: str  # relative to the repository root
    old: str
    new: str


@dataclass(frozen=True, kw_only=True)
class Injection:
    name: str
    kind: Kind
    stage: str  # the stage whose artifact (or compile time) changes first
    subject: str  # commit subject
    description: str
    edits: tuple[Edit, ...]
    workaround: str | None  # the knob expected to restore the metric, if any
    probe: tuple[str, int]  # (workload, seq) that shows it


INJECTIONS: dict[str, Injection] = {i.name: i for i in (
    Injection(
        name="workdiv_m127", kind="device_time", stage="kernel",
        subject="kernel: keep matmul N splits within one cohort of 8 cores",
        description="The cost-model split search stops splitting N across more than 8 cores. "
                    "Shapes whose M can be split (128) still fill 32 cores; M=127 is prime, so its "
                    "matmuls fall back to a K split whose partial sums cross the ring.",
        edits=(Edit("spyre_sim/stages/kernel.py",
                    "            if b * m * n * k > cores:\n                continue",
                    "            if b * m * n * k > cores or n > 8:  # keep N splits within one "
                    "cohort\n                continue"),),
        workaround="work_division", probe=("mlp", 127)),
    Injection(
        name="fusion_off", kind="device_time", stage="lower",
        subject="config: turn pointwise fusion off by default while investigating a fusion bug",
        description="Every op becomes its own kernel: more launches and DRAM round trips for every "
                    "epilogue.",
        edits=(Edit("spyre_sim/config.py", "    fusion: bool = True", "    fusion: bool = False"),),
        workaround="fusion", probe=("mlp", 128)),
    Injection(
        name="restickify_a", kind="device_time", stage="layout",
        subject="layout: always restickify matmul A onto K",
        description="Matmul operand A is copied into a fresh K-sticked buffer even when it already "
                    "is sticked on K: one extra restickify kernel per matmul.",
        edits=(Edit("spyre_sim/stages/layout.py",
                    "        a = self.stick_on(a, len(self.layouts[a].host_size) - 1)",
                    "        rank = len(self.layouts[a].host_size)\n"
                    "        a = self.restickify(a, _order_with_stick(rank, rank - 1))"),),
        workaround=None, probe=("mlp", 128)),
    Injection(
        name="fp16_reduction", kind="numerics", stage="kernel",
        subject="config: accumulate reductions in fp16 (faster softmax and norms)",
        description="sum/mean/softmax/layernorm kernels keep their partial sums in fp16, one stick "
                    "at a time: the error of every normalisation grows.",
        edits=(Edit("spyre_sim/config.py", '    reduction_accumulation: str = "fp32"',
                    '    reduction_accumulation: str = "fp16"'),),
        workaround="reduction_accumulation", probe=("layernorm", 128)),
    Injection(
        name="quick_gelu", kind="numerics", stage="decompose",
        subject="decompose: lower GELU to x*sigmoid(1.702x) (the SFU has sigmoid)",
        description="The 'quick GELU' approximation replaces the exact erf GELU: every MLP's "
                    "output is off by up to ~2e-2, far above fp16 rounding.",
        edits=(Edit("spyre_sim/decompositions.py",
                    '    return b.emit(n.name, "gelu", (args[0],), '
                    'approximate=kwargs.get("approximate", "none"))',
                    '    scaled = b.emit(f"{n.name}_scaled", "mul", (args[0], 1.702))\n'
                    '    gate = b.emit(f"{n.name}_gate", "sigmoid", (scaled,))\n'
                    '    return b.emit(n.name, "mul", (args[0], gate))'),),
        workaround=None, probe=("mlp", 128)),
    Injection(
        name="quadratic_verify", kind="compile_time", stage="decompose",
        subject="decompose: verify every op's shape after each emitted op",
        description="A debugging aid left on: after every op the builder re-infers the shape of "
                    "every op emitted so far, so decompose time grows with the square of the "
                    "graph size.",
        edits=(Edit("spyre_sim/graph_builder.py",
                    "        self.values[name] = (tuple(shape), dtype)\n        return name\n",
                    "        self.values[name] = (tuple(shape), dtype)\n        self.verify()\n"
                    "        return name\n\n"
                    "    def verify(self) -> None:\n"
                    '        """Every device op still infers the shape it was given."""\n'
                    "        for node in self.nodes:\n"
                    '            if node.placement == "device":\n'
                    "                inferred = self._infer_shape(node.op, node.inputs, "
                    "node.attr)\n"
                    "                assert inferred == node.shape, node.to_text()\n"),),
        workaround=None, probe=("attention", 128)),
    Injection(
        name="sdsc_fp16_accumulate", kind="numerics", stage="sdsc",
        subject="sdsc: emit softmax and norm kernels in the SFP's fp16 accumulate mode",
        description="The descriptor generator overrides the kernel spec's accumulation for softmax "
                    "and layernorm kernels: the spec still says fp32, the binary accumulates in "
                    "fp16, and the outputs drift at runtime.",
        edits=(Edit("spyre_sim/stages/sdsc.py",
                    '"accumulation_": spec.accumulation},',
                    '"accumulation_": "fp16" if spec.kind in ("softmax", "layernorm")\n'
                    "                            else spec.accumulation},"),),
        workaround=None, probe=("layernorm", 128)),
    Injection(
        name="gelu_fallback", kind="device_time", stage="decompose",
        subject="ops: route GELU to the CPU until the SFU kernel is requalified",
        description="GELU joins the CPU fallbacks: every MLP pays a device-to-host copy, a CPU "
                    "GELU and a host-to-device copy per call.",
        edits=(Edit("spyre_sim/ops.py", '    "embedding", "arange",',
                    '    "embedding", "gelu", "arange",'),),
        workaround=None, probe=("mlp", 128)),
    Injection(
        name="lower_fusion_check", kind="compile_time", stage="lower",
        subject="lower: check the fusion invariants after fusing",
        description="A debugging aid left on: after fusion the lower stage walks the graph again "
                    "to check that node names are unique and that no node sits in two fusion "
                    "groups. No artifact changes; the lower stage executes a few percent more "
                    "instructions, a change its sub-millisecond wall time cannot show.",
        edits=(Edit("spyre_sim/stages/lower.py",
                    "    groups = fuse(nodes, config)\n    log.info(",
                    "    groups = fuse(nodes, config)\n"
                    "    assert len({n.name for n in nodes}) == len(nodes), \"duplicate node "
                    "names\"\n    grouped = [name for group in groups for name in group.nodes]\n"
                    "    assert len(grouped) == len(set(grouped)), "
                    "\"a node is in two fusion groups\"\n    log.info("),),
        workaround=None, probe=("attention", 128)),
    Injection(
        name="dram_derate", kind="device_time", stage="kernel",
        subject="device: derate the DRAM model to the sustained rate of a busy bus",
        description="The effective DRAM bandwidth drops from 136.5 to 100 GB/s: every memory-bound "
                    "kernel slows down, device time x1.13-1.33 on the catalogue's workloads. "
                    "Reverted by the next commit in the scratch history of "
                    "tests/e2e/test_reverted_excursion.py.",
        edits=(Edit("spyre_sim/device.py", "    dram_effective_gbps: float = 136.5",
                    "    dram_effective_gbps: float = 100.0  # the sustained rate of a busy bus"),),
        workaround=None, probe=("mlp", 128)),
    # Waits no CPU clock of the compiling process sees (benchmarks/waits.py).
    Injection(
        name="sdsc_wait", kind="compile_blocked", stage="sdsc",
        subject="sdsc: back off 50 ms before reading the descriptor cache",
        description="The sdsc stage sleeps 50 ms per graph it compiles: the compile's wall time "
                    "grows by 50 ms per graph, its CPU time and its artifacts do not.",
        edits=(Edit("spyre_sim/stages/sdsc.py", "import math\nfrom typing import Any\n",
                    "import math\nimport time\nfrom typing import Any\n"),
               Edit("spyre_sim/stages/sdsc.py",
                    "def run(program: KernelProgram, config: Config) -> SdscBundle:\n"
                    "    del config\n",
                    "def run(program: KernelProgram, config: Config) -> SdscBundle:\n"
                    "    del config\n"
                    "    time.sleep(0.05)  # back off before the descriptor cache is read\n"),),
        workaround=None, probe=("mlp", 128)),
    Injection(
        name="backend_child", kind="compile_children", stage="backend",
        subject="backend: self-check the binary in a child process",
        description="The backend stage runs a child process that spends 0.2 s of CPU per graph "
                    "it compiles, as a backend compiler run as a subprocess (torch-spyre's "
                    "dxp_standalone) does: the compiling process's own CPU time does not grow.",
        edits=(Edit("spyre_sim/stages/backend.py", "import math\nfrom typing import Any\n",
                    "import math\nimport subprocess\nimport sys\nfrom typing import Any\n"),
               Edit("spyre_sim/stages/backend.py",
                    "def run(bundle: SdscBundle, config: Config) -> Binary:\n    del config\n",
                    "def run(bundle: SdscBundle, config: Config) -> Binary:\n    del config\n"
                    "    subprocess.run([sys.executable, \"-c\", \"import time\\n\"  "
                    "# a self-check\n"
                    "                    \"start = time.process_time()\\n\"\n"
                    "                    \"while time.process_time() - start < 0.2:\\n"
                    "    pass\\n\"],\n"
                    "                   check=True)\n"),),
        workaround=None, probe=("mlp", 128)),
)}
# A plan entry that reverts an earlier injection: REVERT + its name.
REVERT = "revert:"

# Harmless commits between the injections: the artifacts and the timing do not change.
BENIGN: tuple[tuple[str, Edit], ...] = (
    ("docs: say what the stage-capture directory is for",
     Edit("spyre_sim/debug_capture.py", '"""The stage-capture protocol:',
          '"""The stage-capture protocol (read by the stage bisector):')),
    ("ops: comment on the vector classes",
     Edit("spyre_sim/ops.py",
          "_POINTWISE: dict[str, tuple[str, VectorClass, Callable[..., torch.Tensor]]] = {",
          "# Transcendental ops run at the SFU rate; simple ALU ops faster (cost.py).\n"
          "_POINTWISE: dict[str, tuple[str, VectorClass, Callable[..., torch.Tensor]]] = {")),
    ("layouts: name the stick constant's source once more",
     Edit("spyre_sim/layouts.py", "STICK_BYTES = 128  # BYTES_IN_STICK",
          "STICK_BYTES = 128  # 128-byte sticks: BYTES_IN_STICK")),
    ("timeline: clarify the noise factor docstring",
     Edit("spyre_sim/timeline.py", '    """Lognormal with mean 1',
          '    """A lognormal factor with mean 1')),
    ("executor: explain why values are stored as fp32",
     Edit("spyre_sim/executor.py", 'STICK_ELEMS = 64',
          "# fp16 values live in fp32 tensors: rounding, not storage, makes them fp16.\n"
          "STICK_ELEMS = 64")),
    ("errors: document the runtime error",
     Edit("spyre_sim/errors.py", '    """The compiled program cannot run on the given inputs."""',
          '    """The compiled program cannot run on the given inputs (shapes, layouts)."""')),
    ("config: tidy the knob table comment",
     Edit("spyre_sim/config.py", "KNOBS: tuple[Knob, ...] = (",
          "# The decisions a knob bisector may toggle, in pipeline order.\n"
          "KNOBS: tuple[Knob, ...] = (")),
    ("sdsc: note where the core-to-slice map comes from",
     Edit("spyre_sim/stages/sdsc.py", "def core_to_slice(",
          "# superdsc.py: core_id -> Mod(floor(core_id / inner), split)\ndef core_to_slice(")),
    ("backend: say why the binary is CBOR",
     Edit("spyre_sim/stages/backend.py", "PROGRAM_BINARY_VERSION = 2",
          "PROGRAM_BINARY_VERSION = 2  # CBOR, like DeepTools' historical g2.graph.cbor")),
)


def apply_edit(root: Path, edit: Edit) -> None:
    path = root / edit.path
    text = path.read_text()
    count = text.count(edit.old)
    if count != 1:
        raise SpyreRegressError(
            f"scenario edit for {edit.path} matches {count} times (expected exactly once); "
            "the scenario no longer fits the sources — update regressions/groundtruth/scenarios.py")
    path.write_text(text.replace(edit.old, edit.new))


def apply(root: Path, injection: Injection) -> None:
    for edit in injection.edits:
        apply_edit(root, edit)


def revert(root: Path, injection: Injection) -> None:
    """Undo `injection`, as `git revert` of its commit would."""
    for edit in reversed(injection.edits):
        apply_edit(root, Edit(edit.path, edit.new, edit.old))
