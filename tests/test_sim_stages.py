"""Every stage's artifact for the MLP block, attention, softmax and RMSNorm."""

import ast
import json
from pathlib import Path

import pytest

import spyre_sim
from tests.conftest import compile_workload

STAGE_DIR = Path(spyre_sim.__file__).parent / "stages"


@pytest.fixture(scope="module")
def mlp():
    return compile_workload("mlp", 127, 256)[0].artifacts


@pytest.fixture(scope="module")
def attention():
    return compile_workload("attention", 127, 128)[0].artifacts


def test_stage_names_and_order():
    assert spyre_sim.STAGES == ("dynamo", "decompose", "lower", "layout", "kernel", "sdsc",
                                "backend", "runtime")
    assert sorted(p.stem for p in STAGE_DIR.glob("[a-z]*.py")) == sorted(spyre_sim.STAGES)


def test_no_stage_imports_another():
    for path in STAGE_DIR.glob("[a-z]*.py"):
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                     for alias in node.names}
        assert not any(m and m.startswith("spyre_sim.stages") for m in imported), path.name


def test_mlp_dynamo_captures_one_aten_graph(mlp):
    text = mlp["dynamo"]
    assert text.startswith("dynamo: 1 graph(s), 0 graph break(s)")
    assert "aten.addmm.default" in text and "aten.gelu.default" in text
    assert "guard: TENSOR_MATCH" in text


def test_mlp_decompose_splits_addmm(mlp):
    text = mlp["decompose"]
    assert "addmm(" not in text.replace("aten.addmm", "")
    assert "= mm(" in text and "= add(" in text and "= gelu(" in text


def test_mlp_lower_fuses_bias_and_gelu_into_the_matmul(mlp):
    groups = [line.strip() for line in mlp["lower"].splitlines() if "group " in line]
    assert groups == ["group g0 matmul: %addmm_mm %addmm %gelu",
                      "group g1 matmul: %addmm_1_mm %addmm_1"]


def test_mlp_layout_prepacks_weights_on_n(mlp):
    text = mlp["layout"]
    # the Linear weight [out, in] is read as Wᵀ: stored sticked on `out` (its dim 0)
    weight = next(line for line in text.splitlines() if line.strip().startswith("layout %arg0_1"))
    assert "order=[1, 0]" in weight
    assert "restickify" not in text


def test_mlp_kernel_specs(mlp):
    text = mlp["kernel"]
    kernels = [line.strip() for line in text.splitlines() if line.strip().startswith("kernel ")]
    assert len(kernels) == 2
    assert all("acc=fp32" in k and "format=SEN169_FP16" in k and "split=" in k for k in kernels)
    assert '"m":127' in kernels[0]


def test_mlp_sdsc_is_superdsc_shaped(mlp):
    document = json.loads(mlp["sdsc"])
    assert document["version"] == 2
    sdsc = document["sdscs"]["k0_mm_add_gelu"]
    assert sdsc["numCoresUsed_"] == len(sdsc["coreIdToWkSlice_"])
    (body,) = sdsc["dscs_"][0].values()
    units = [op["exUnit"] for op in body["computeOp_"]]
    assert units == ["pt", "sfp", "sfp"]
    assert {ds["dsType_"] for ds in body["labeledDs_"]} >= {"INPUT", "KERNEL", "OUTPUT"}
    assert all(node["nodeType_"] == "allocate" for node in body["scheduleTree_"])


def test_mlp_backend_and_runtime(mlp):
    assert mlp["backend"].startswith("binary ")
    assert '"modelled_compile_s"' in mlp["backend"]
    runtime = mlp["runtime"]
    assert "job plan: 2 steps" in runtime
    steps = [line.split()[0] for line in runtime.splitlines()[1:]]
    assert steps == ["compute", "compute"]


def test_attention_becomes_matmul_softmax_matmul(attention):
    text = attention["decompose"]
    assert "= aten." not in text and "scaled_dot_product_flash_attention_for_cpu(" not in text
    assert text.count("= bmm(") == 2 and "= softmax(" in text
    assert "causal_mask" in text


def test_attention_layout_restickifies_k_and_pads_v(attention):
    text = attention["layout"]
    assert "= restickify(" in text  # Kᵀ is sticked on the head dim, matmul wants it on seq
    assert "= pad_rows(" in text  # seq 127 rows of V padded to two whole sticks


def test_softmax_fused_and_explicit():
    fused = compile_workload("softmax", 127, 256)[0].artifacts["kernel"]
    explicit = compile_workload("softmax", 127, 256,
                                softmax_decomposition="explicit")[0].artifacts["kernel"]
    assert "kernel k0_softmax softmax" in fused
    assert "= amax(" in explicit and "= exp(" in explicit and "= sum(" in explicit


def test_rmsnorm_is_a_reduction_with_epilogue():
    artifacts = compile_workload("rmsnorm", 128, 256)[0].artifacts
    assert "= rsqrt(" in artifacts["decompose"] and "= mean(" in artifacts["decompose"]
    assert " reduction " in artifacts["kernel"]


@pytest.mark.parametrize("workload", ["mlp", "attention"])
def test_canonical_text_is_deterministic(workload):
    first = compile_workload(workload, 127, 128)[0].artifacts
    second = compile_workload(workload, 127, 128)[0].artifacts
    for stage in spyre_sim.STAGES:
        assert first[stage] == second[stage], stage
    assert "0x" not in "".join(first.values())  # no addresses


def test_compile_times_cover_every_stage():
    program = compile_workload("mlp", 1, 128)[0]
    assert set(program.compile_times) == set(spyre_sim.STAGES)
    assert all(t >= 0 for t in program.compile_times.values())


def test_reductions_use_every_core():
    artifacts = compile_workload("rmsnorm", 127, 256)[0].artifacts["kernel"]
    reduction = next(line for line in artifacts.splitlines() if " reduction " in line)
    # 127 rows cannot fill 32 cores alone: the reduced dim takes the rest
    assert "cores=32" in reduction and '"r":' in reduction.split("split=")[1]
