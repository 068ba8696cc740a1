"""Inductor's debug trace read into the stage-capture protocol (backends/inductor.py).

The canonical rules are pinned on literal snippets; the ordering and headers on fabricated
graphs. The slow tests compile a small MLP with Inductor in separate Python processes (other
pids, temp dirs, timestamps and hash seeds) and check that the captures are byte-identical, and
that a fusion knob changes the capture from the fusion stage on, as the project's own stage
bisector reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backends import inductor
from backends.inductor import TracedGraph, canonical
from regressions.bisection.stages import bisect_stages
from regressions.probing.protocol import StageAnswer
from regressions.records.captures import load_capture, single_capture

ROOT = Path(__file__).resolve().parents[1]

# --- canonical: one rule per snippet -----------------------------------------------------------


def test_a_source_comment_keeps_the_code_and_drops_path_and_line():
    text = ("        # File: /home/ci/build-7/workloads/mlp.py:12 in forward, code: "
            "return self.norm(x)\n")
    assert canonical("aot", text) == "        # in forward, code: return self.norm(x)\n"


def test_a_resume_function_loses_its_line_number():
    text = "# File: /w/x.py:10 in torch_dynamo_resume_in_f_at_9, code: return y + 1\n"
    assert canonical("dynamo", text) == \
        "# in torch_dynamo_resume_in_f_at_<line>, code: return y + 1\n"


def test_an_inductor_cache_path_loses_user_temp_dir_shard_and_hash():
    text = ("# kernel path: /tmp/torchinductor_ci/tmpitwze4u0/ab/"
            "cabqcjdqjz5cwh4cxzpm7fucg7xn2qfqbyrj2ywbmhzcdirnx6os.py\n")
    assert canonical("codegen", text) == \
        "# kernel path: <inductor-cache>/<tmp>/<shard>/<hash>.py\n"


def test_a_hashed_kernel_name_keeps_its_name():
    text = "cpp_fused_add_native_layer_norm_1 = async_compile.cpp_pybinding(['float*'], r'''\n"
    assert canonical("codegen", text) == text


def test_another_absolute_path_keeps_its_file_name_only():
    assert canonical("fusion", "loaded from /opt/venv/lib/site.py\n") == \
        "loaded from <path>/site.py\n"


def test_a_pid_and_a_timestamp_go():
    text = "run_2026_12_02_08_55_13_685000-pid_6497 at 2026-12-02 08:55:13\n"
    assert canonical("pre_fusion", text) == "run_<time>-pid_<pid> at <time>\n"


def test_a_memory_address_goes_but_a_hex_constant_stays():
    text = ("fn = <function f at 0x7f3a2c1b9e40>\n"
            "auto tmp1 = static_cast<int32_t>(0x7f800000);\n")
    assert canonical("codegen", text) == ("fn = <function f at 0x<addr>>\n"
                                          "auto tmp1 = static_cast<int32_t>(0x7f800000);\n")


def test_a_thread_count_goes_from_the_generated_code():
    assert canonical("codegen", "#pragma omp parallel num_threads(28)\n") == \
        "#pragma omp parallel num_threads(<threads>)\n"


def test_process_wide_graph_counters_go():
    text = "# AOT ID: ['3_inference']\n# graph model__3_inference_3\n"
    assert canonical("codegen", text) == \
        "# AOT ID: ['<n>_inference']\n# graph model__<n>_inference_<n>\n"


def test_a_log_line_printed_mid_compile_goes():
    text = ("W1202 08:55:13.685000 6497 torch/_inductor/debug.py:545] [0/0] debug trace: /tmp/x\n"
            "op0: ExternKernelSchedulerNode(ExternKernelOut)\n")
    assert canonical("fusion", text) == "op0: ExternKernelSchedulerNode(ExternKernelOut)\n"


def test_what_the_compiler_decided_stays():
    kernel = (
        "op3_op4: OuterLoopFusedSchedulerNode(SchedulerNode,SchedulerNode)\n"
        "    var_ranges = {p0: 8, p1: 32}\n"
        "for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); "
        "x1+=static_cast<int64_t>(16L))\n"
        "    auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + x1, "
        "static_cast<int64_t>(16));\n"
        "    auto tmp11 = 1 / std::sqrt(tmp10); auto q = tmp0/tmp1; // x // 2\n"
        "mul: \"f32[8, 64]\" = torch.ops.aten.mul.Tensor(addmm, 0.5)\n")
    assert all(canonical(stage, kernel) == kernel for stage in inductor.STAGES)


def test_an_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="unknown Inductor stage 'lower'"):
        canonical("lower", "")


# --- ordering, headers, timers -----------------------------------------------------------------


def _graph(dynamo: str, *folders: str) -> TracedGraph:
    return TracedGraph(dynamo, tuple((name, {"output_code.py": f"code {dynamo}"})
                                     for name in folders))


def test_graphs_are_ordered_by_their_counters_not_as_listed():
    graphs = [_graph("late\n", "model__10_inference_10.10"),
              _graph("early\n", "model__9_inference_9.9")]
    assert [g.dynamo for g in inductor.ordered(graphs)] == ["early\n", "late\n"]


def test_each_graph_gets_a_header_by_its_place_and_kind():
    texts = inductor.stage_texts([_graph("b\n", "model__5_inference_5.5"),
                                  _graph("a\n", "model__4_inference_4.4")])
    assert texts["dynamo"] == "# ==== graph 0 (dynamo) ====\na\n\n# ==== graph 1 (dynamo) ====\nb\n"
    assert texts["codegen"] == ("# ==== graph 0 (inference) ====\ncode a\n\n"
                                "# ==== graph 1 (inference) ====\ncode b\n")
    assert texts["fusion"].count(inductor.MISSING) == 2


def test_stage_seconds_count_only_the_timers_new_entries():
    before = {"GraphLowering.run": 1}
    after = {"GraphLowering.run": [5.0, 0.25], "Scheduler.__init__": [0.5],
             "async_compile.wait": [1.0], "Scheduler.codegen": [0.5]}
    wall = inductor.stage_wall_s(before, after)
    assert wall["pre_fusion"] == 0.25 and wall["fusion"] == 0.5 and wall["codegen"] == 1.5
    assert wall["dynamo"] == 0


# --- real compiles in separate processes -------------------------------------------------------

CAPTURE_SCRIPT = """
import json, sys
import torch
from backends import inductor

class MLP(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up = torch.nn.Linear(width, 2 * width)
        self.down = torch.nn.Linear(2 * width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(self.down(torch.nn.functional.gelu(self.up(x))) + x)

torch.manual_seed(0)
out, knobs = sys.argv[1], json.loads(sys.argv[2])
print(inductor.capture(MLP(32).eval(), (torch.randn(8, 32),), knobs or None, out))
"""


def _capture_in_a_process(root: Path, name: str, hash_seed: str, knobs: dict) -> Path:
    """One capture in its own Python process, from a workload file at its own path, with its
    own hash seed. The processes share an Inductor cache root (its precompiled C++ header, some
    150 MB, is built once, and a kernel another process built is a C++ cache hit): a capture
    keeps only that cache, so no stage is skipped."""
    source = root / f"src-{name}" / "workload.py"
    source.parent.mkdir()
    source.write_text(CAPTURE_SCRIPT)
    env = {**os.environ, "PYTHONHASHSEED": hash_seed,
           "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor-cache")}
    done = subprocess.run([sys.executable, str(source), str(root / name), json.dumps(knobs)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return single_capture(root / name)


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inductor")
    return {"a": _capture_in_a_process(root, "a", "1", {}),
            "b": _capture_in_a_process(root, "b", "2", {}),
            "unfused": _capture_in_a_process(root, "unfused", "3", {"max_fusion_size": 1})}


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("[0-9]-*.txt"))}


@pytest.mark.slow
def test_two_processes_capture_byte_identical_stage_files(captures):
    a, b = _files(captures["a"]), _files(captures["b"])
    assert list(a) == ["1-dynamo.txt", "2-aot.txt", "3-post_grad.txt", "4-pre_fusion.txt",
                       "5-fusion.txt", "6-codegen.txt"]
    assert a == b
    text = b"".join(a.values())
    assert b"/tmp" not in text and b"pid_" not in text and b"# File:" not in text
    assert b"aten.addmm" in a["2-aot.txt"] and b"Vectorized<float>" in a["6-codegen.txt"]
    index = json.loads((captures["a"] / "stages.json").read_text())
    assert index["version"] == 1 and index["graphs"] == 1 and index["backend"] == "inductor"


@pytest.mark.slow
def test_the_capture_reads_as_a_project_stage_capture(captures):
    capture = load_capture(captures["a"])
    assert capture.stages == inductor.STAGES
    assert all(capture.texts[s].startswith("# ==== graph 0 (") for s in inductor.STAGES)
    assert capture.wall_s["codegen"] > 0


@pytest.mark.slow
def test_a_fusion_knob_first_diverges_at_the_fusion_stage(captures):
    good, bad = load_capture(captures["a"]), load_capture(captures["unfused"])
    probe = StageAnswer(status="ok", compile_times=(), device_time_us=0.0, kernels=(),
                        stages=inductor.STAGES)
    report = bisect_stages(good, bad, probe, probe, good="default", bad="max_fusion_size=1",
                           workload="mlp",
                           seq=8, width=32)
    assert report.first_divergent_stage == "fusion" and report.basis == "artifact"
    changed = {d.stage: d.changed for d in report.stages}
    assert changed == {"dynamo": False, "aot": False, "post_grad": False, "pre_fusion": False,
                       "fusion": True, "codegen": True}
    # the default fuses the layer norm's nodes into one scheduler node; one node per fusion
    # fuses nothing, and the reported diff is the fusion stage's, showing the fused node go
    assert "FusedSchedulerNode" in good.texts["fusion"]
    assert "FusedSchedulerNode" not in bad.texts["fusion"]
    assert any(line.startswith("-") and "FusedSchedulerNode(" in line
               for line in report.diff.splitlines())
    assert report.diff.startswith("--- good/fusion\n+++ bad/fusion\n")
