"""Known regressions and decoys in the example Inductor-based backend
(`examples/inductor_project`): the ground truth for running the nightly on a compiler this
project did not write.

Each injection changes what an Inductor-based backend owns - a config default, a registered
decomposition, a custom FX pass - and makes one thing worse, first visible at one of
Inductor's stages (backends/inductor.py). The decoys are a comment-only change to the pass and
a real compile-time speed-up of it; neither may be reported.
"""

from __future__ import annotations

from regressions.groundtruth import scratch
from regressions.groundtruth.scenarios import Edit, Injection

FOLDER = "examples/inductor_project"
SOURCES = ("pyproject.toml", "README.md", "asv.conf.json", "inductor_example", "benchmarks")

INJECTIONS: dict[str, Injection] = {i.name: i for i in (
    Injection(
        name="tanh_gelu", kind="numerics", stage="aot",
        subject="decompositions: GELU through tanh, one transcendental fewer",
        description="The exact (erf) GELU is decomposed into the tanh approximation, which differs "
                    "from it by up to about 1e-3: the AOT graph computes tanh where it computed "
                    "erf, and the output's error against float64 grows by three orders of "
                    "magnitude.",
        edits=(Edit("inductor_example/decompositions.py",
                    '    """Op -> decomposition, for the ops this backend lowers its own way (none '
                    'yet)."""\n    return {}\n',
                    '    """Op -> decomposition, for the ops this backend lowers its own way."""\n'
                    "    return {aten.gelu.default: gelu_tanh}\n\n\n"
                    "def gelu_tanh(x: torch.Tensor, approximate: str = \"none\") -> torch.Tensor:\n"
                    '    """GELU through tanh: one transcendental instead of erf\'s '
                    'polynomial."""\n'
                    "    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)\n"
                    "    return 0.5 * x * (1.0 + torch.tanh(inner))\n"),),
        workaround=None, probe=("mlp", 256)),
    Injection(
        name="verify_per_node", kind="compile_time", stage="post_grad",
        subject="passes: re-verify the graph for every node after each step",
        description="The custom post-grad pass regenerates the graph's code once per node after "
                    "visiting each node: quadratic work in the graph's size, in the post_grad "
                    "stage. The graph it leaves is the same, so only the stage's compile time "
                    "shows it.",
        edits=(Edit("inductor_example/passes.py",
                    "        verify(graph)  # once, after the rewrite\n",
                    "            for _ in graph.nodes:  # every node may have changed: check each\n"
                    "                verify(graph)\n"),),
        workaround=None, probe=("gated", 256)),
    Injection(
        name="scalar_kernels", kind="host_time", stage="codegen",
        subject="config: scalar C++ kernels (cpp.simdlen=1) while a vectorization bug is open",
        description="The backend's config turns vectorization off: every pointwise and reduction "
                    "loop of the generated C++ runs one element at a time. The gated workload, all "
                    "pointwise and reduction work, runs several times slower; the MLP, mostly "
                    "matmuls, a little.",
        edits=(Edit("inductor_example/backend.py", "CONFIG: dict[str, Any] = {}",
                    'CONFIG: dict[str, Any] = {"cpp.simdlen": 1}'),),
        workaround="cpp.simdlen", probe=("gated", 256)),
)}

# Decoys and harmless commits, in the order a history applies them.
BENIGN: tuple[tuple[str, Edit], ...] = (
    ("passes: say why the pass has a uuid",
     Edit("inductor_example/passes.py", "    def uuid(self) -> str:\n",
          "    # Inductor keys its FX graph cache on this: a change to the pass must change it.\n"
          "    def uuid(self) -> str:\n")),
    ("passes: verify the graph once after the rewrite, not after every node",
     Edit("inductor_example/passes.py",
          "            verify(graph)  # after every node, while the pass is new\n",
          "        verify(graph)  # once, after the rewrite\n")),
    ("docs: say how to use the backend",
     Edit("README.md", "# inductor-example\n",
          "# inductor-example\n\n`torch.compile(model, backend=inductor_example.backend."
          "compile_with_defaults)`.\n")),
)

PROJECT = scratch.Project("inductor-example", SOURCES, FOLDER, INJECTIONS, benign=BENIGN)
# The history the end-to-end test runs the nightly on (7 commits, every one benchmarked: at
# stride 2 the pass regression's edge test had only 3-4 commits before it, across the real
# step down of the speed-up decoy, and its interval twice failed to leave 1 out): the
# comment-only decoy, the precision loss, the compile-time speed-up decoy (before the pass
# regression it shares a line with), the scalar kernels, the docs decoy, and the pass that
# repeats work last. Last, its culprit is
# the head: its alert is provisional and has no head check, which on the compile clock is a
# hundred more cold compiles of the slow build (about a minute); the speed-up decoy is a
# step down in the compile series, which is not reported.
PLAN: list[str | None] = [None, "tanh_gelu", None, "scalar_kernels", None, "verify_per_node"]
