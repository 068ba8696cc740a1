"""A torch-spyre compile's stages as canonical texts, written in the stage-capture protocol.

Two builds of the same code must write the same text unless the compiler decided something
differently. Dynamo's graph, AOT Autograd's and the post-grad graph, the fused schedule and the
generated wrapper come from Inductor's own debug trace and keep `backends/inductor.py`'s
rules (paths, pids, counters, addresses). Two kinds of text are torch-spyre's:

- the loop-level IR around its pre-scheduling passes, as its `format_operations` prints it,
  without each operation's `stack_traces` (the source file and line of the user's program);
- each kernel's SDSC (`sdsc_N.json`, one op per file) and `bundle.mlir`, under the kernel's
  name: the JSON with sorted keys and without `debug_handle_` (source locations, the ATen op
  and the IR chain it came from: provenance, not a decision), and without the generated
  directory's name (a random digest and a temporary suffix); the generated wrapper without
  the same provenance it hands each kernel (`debug_handle=DebugHandle(...)`).

Used only by a capture (it writes with `spyre_sim.debug_capture`), never by a compile.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CAPTURE_VERSION = 1  # the `torch_spyre` entry of a capture's stages.json
STACK_TRACES = re.compile(r"^(?P<indent>[ \t]*)stack_traces = \{.*?^(?P=indent)\}\n",
                          re.M | re.S)
# `<8 hex digits>_<kernel name>_<mkdtemp suffix>`, torch-spyre's get_output_dir
KERNEL_DIRECTORY = re.compile(r"^[0-9a-f]{8}_(?P<kernel>.+)_[A-Za-z0-9_]{8}$")
DROPPED_SDSC_KEYS = ("debug_handle_",)
# the generated wrapper passes the same provenance to each kernel's OpSpec, one line each
WRAPPER_PROVENANCE = re.compile(r"^[ \t]*debug_handle=DebugHandle\(.*\),?[ \t]*\n", re.M)


def ir_text(text: str, inductor: Any) -> str:
    """Loop-level IR without source locations, through Inductor's common rules."""
    return inductor.canonical("pre_fusion", STACK_TRACES.sub("", text))


def sdsc_text(document: Mapping[str, Any]) -> str:
    """One SDSC file: each op's entry without the keys that record provenance."""
    def kept(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: kept(v) for k, v in value.items() if k not in DROPPED_SDSC_KEYS}
        if isinstance(value, list):
            return [kept(v) for v in value]
        return value
    return json.dumps(kept(dict(document)), indent=1, sort_keys=True) + "\n"


def kernel_name(directory: str) -> str:
    found = KERNEL_DIRECTORY.match(directory)
    return found.group("kernel") if found else directory


def kernel_text(directory: Path) -> str:
    """A kernel's SDSC files in index order, then its bundle, under the kernel's name."""
    def index(path: Path) -> int:
        digits = re.findall(r"\d+", path.stem)
        return int(digits[-1]) if digits else 0

    parts = [f"# ---- kernel {kernel_name(directory.name)} ----\n"]
    for path in sorted(directory.glob("sdsc_*.json"), key=index):
        parts.append(f"# {path.name}\n" + sdsc_text(json.loads(path.read_text())))
    bundle = directory / "bundle.mlir"
    if bundle.is_file():
        parts.append("# bundle.mlir\n" + bundle.read_text().rstrip("\n") + "\n")
    return "".join(parts)


class Recorder:
    """What one compile shows a capture, graph by graph: Dynamo's graph, the IR before the
    pre-scheduling passes and after each, and the kernel directories codegen created."""

    def __init__(self, inductor: Any) -> None:
        self.inductor = inductor
        self.graphs: list[dict[str, Any]] = []
        self.texts: dict[str, str] = {}

    def dynamo(self, gm: Any) -> None:
        self.graphs.append({"dynamo": gm.print_readable(print_output=False), "ir": {},
                            "kernels": []})

    def before_passes(self, graph: Any) -> None:
        self.graphs[-1]["ir"]["lowering"] = self._format(graph)

    def after_pass(self, name: str, graph: Any) -> None:
        self.graphs[-1]["ir"][name] = self._format(graph)

    def kernel_directory(self, made: str) -> None:
        self.graphs[-1]["kernels"].append(Path(made))

    def read(self, root: Path, stages: Sequence[str]) -> None:
        """Every stage's text, read while the trace folders and the kernels exist (inside the
        compile's cache directory): Inductor's folders in the order of their counters."""
        names = sorted(self.inductor._folders(root), key=self.inductor.natural_key)
        self.texts = stage_texts(stages, self,
                                 [self.inductor._read_folder(root / n) for n in names])

    @staticmethod
    def _format(graph: Any) -> str:
        from torch_spyre._inductor.pass_utils import format_operations

        return format_operations(graph.operations)


def stage_texts(stages: Sequence[str], recorder: Recorder,
                folders: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """Every stage's text: each graph's section under a header naming it by its place."""
    inductor = recorder.inductor
    trace_files = {"aot": "fx_graph_readable.py", "post_grad": "fx_graph_transformed.py",
                   "scheduling": "ir_post_fusion.txt"}
    texts: dict[str, list[str]] = {stage: [] for stage in stages}
    for index, graph in enumerate(recorder.graphs):
        files = folders[index] if index < len(folders) else {}
        for stage in stages:
            if stage == "dynamo":
                text = inductor.canonical("dynamo", graph["dynamo"])
            elif stage in trace_files:
                text = ir_text(files.get(trace_files[stage], inductor.MISSING), inductor)
            elif stage == "codegen":
                wrapper = files.get("output_code.py", inductor.MISSING)
                text = (inductor.canonical("codegen", WRAPPER_PROVENANCE.sub("", wrapper))
                        + "".join(kernel_text(d) for d in graph["kernels"]))
            else:
                text = ir_text(graph["ir"].get(stage, "# (no such pass at this commit)\n"),
                               inductor)
            texts[stage].append(inductor.header(index, "graph") + text)
    return {stage: "\n".join(t if t.endswith("\n") else t + "\n" for t in parts)
            for stage, parts in texts.items()}


def capture(backend: Any, program: Any, inputs: Sequence[Any],
            values: Mapping[str, Any] | None, out_dir: Path) -> Path:
    """One compile through `backend` (torch_spyre.py) with Inductor's trace on and the IR
    and kernels recorded; its stage capture under `out_dir`, the directory written."""
    from spyre_sim import debug_capture  # the protocol's writer: only a capture needs it

    inductor = backend.companion("inductor")
    recorder = Recorder(inductor)
    timeline = backend.Timeline()
    with tempfile.TemporaryDirectory(prefix="torch-spyre-trace-") as trace_dir:
        root = Path(trace_dir) / "torchinductor"
        backend.load_compiler()
        from torch_spyre.execution import async_compile

        original = async_compile.get_output_dir

        def get_output_dir(kernel: str) -> str:
            made = original(kernel)
            recorder.kernel_directory(made)
            return made

        async_compile.get_output_dir = get_output_dir
        try:
            backend.compile_traced(
                program, inputs, values, timeline, graph_texts=recorder.dynamo,
                before_passes=recorder.before_passes, after_pass=recorder.after_pass,
                inductor_config={**inductor.CAPTURE_CONFIG, "trace.debug_dir": trace_dir},
                finished=lambda: recorder.read(root, backend.STAGES))
        finally:
            async_compile.get_output_dir = original
        texts = recorder.texts
    seconds = timeline.seconds("cpu")
    summary = {"backend": backend.NAME, "capture_version": CAPTURE_VERSION,
               "torch_spyre": backend.environment(), "graphs": len(recorder.graphs),
               "settings": dict(sorted((values or {}).items()))}
    return debug_capture.write(out_dir, backend.STAGES, texts,
                               {s: seconds.get(s, 0.0) for s in backend.STAGES}, binaries=[],
                               log_lines=[],
                               summary=summary)


