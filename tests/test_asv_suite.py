"""The asv suite as asv sees it: `asv check`, names, grids, attributes, skips, and one sample each.

Fast tests: no asv environment is built. `asv check -E existing:<this python>` imports the suite
with the interpreter running pytest (the project is installed in it), which is all it needs.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from asv_runner.discovery import disc_benchmarks

import spyre_sim
from benchmarks import (
    bench_compile,
    bench_compile_work,
    bench_execute,
    bench_numerics,
    clocks,
    prepare,
    workloads,
)

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("compile", "execute", "numerics")
# `--bench compile` selects the clock family and the compile-work (instruction count) family;
# `--bench "bench_compile\."` the clock family alone, `--bench compile_work` the other.
SUBFAMILIES = {"compile": ("compile_work",)}


@pytest.fixture(scope="module", autouse=True)
def restore_thread_count():
    """The benchmarks pin one intra-op thread for their process; give the others theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def suite():
    """Every benchmark of the suite, as asv_runner discovers it, by name."""
    return {b.name: b for b in disc_benchmarks(str(ROOT / "benchmarks"))}


@pytest.mark.slow  # over 4 s: out of the quick loop, still in CI
def test_asv_check_passes_in_the_current_interpreter():
    result = subprocess.run(
        [sys.executable, "-m", "asv", "check", "-E", f"existing:{sys.executable}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No problems found" in result.stdout


def test_config_pins_torch_and_the_runner_and_keeps_results_out_of_git():
    lines = (ROOT / "asv.conf.json").read_text().splitlines()
    config = json.loads("\n".join(line for line in lines if not line.strip().startswith("//")))
    assert config["matrix"]["req"] == {"torch": ["2.13.0"], "pip+asv_runner": ["0.3.2"]}
    assert config["branches"] == ["main"]
    assert all(config[key].startswith(".asv/")
               for key in ("env_dir", "results_dir", "html_dir"))
    assert "/.asv/" in (ROOT / ".gitignore").read_text().split()
    assert "--no-deps" in config["build_command"][0]


def test_each_family_is_selected_by_its_name_alone(suite):
    for family in FAMILIES:
        selected = {name for name in suite if re.search(family, name)}
        assert selected, family
        modules = (family, *SUBFAMILIES.get(family, ()))
        assert all(name.startswith(tuple(f"bench_{m}." for m in modules))
                   for name in selected), selected
    assert {n for n in suite if re.search("compile_work", n)} == {
        n for n in suite if n.startswith("bench_compile_work.")}
    assert all(any(re.search(family, name) for family in FAMILIES) for name in suite)


def test_every_benchmark_sets_its_measurement_attributes(suite):
    for name, benchmark in suite.items():
        owner = vars(type(benchmark.func.__self__)) if hasattr(benchmark.func, "__self__") else {}
        assert "version" in owner and benchmark.version == owner["version"], name
        assert "timeout" in owner, name
        if benchmark.type == "time":
            cls = type(benchmark.func.__self__)
            for attribute in ("number", "repeat", "rounds", "warmup_time"):
                assert attribute in owner or issubclass(cls, clocks.ProcessSampled), \
                    (name, attribute)
            low, _, _ = benchmark.repeat
            # asv's Mann-Whitney test needs >= 7 samples a side to reach p < 0.002 (6 + 6: 0.0022)
            assert benchmark.rounds * low >= 7, name
        else:
            assert benchmark.unit != "unit", name


def test_stage_grids_match_spyre_sim():
    assert prepare.STAGES == spyre_sim.STAGES
    assert prepare.EXECUTABLE_STAGES == spyre_sim.EXECUTABLE_STAGES
    timed = list(bench_compile.TIMED_STAGES)
    assert bench_compile.CompileStage.params[0] == timed
    assert timed == [stage for stage in spyre_sim.STAGES if stage in timed]  # pipeline order
    assert bench_numerics.NumericsStageError.params[2] == list(spyre_sim.EXECUTABLE_STAGES)
    assert bench_numerics.NumericsStageErrorDLFloat16.params == \
        bench_numerics.NumericsStageError.params
    assert bench_compile_work.CompileWork.params[2] == list(spyre_sim.STAGES)


def test_grids_cover_the_workloads_and_the_127_128_pair():
    all_workloads = list(workloads.SUITE)
    assert set(workloads.SUITE) <= set(workloads.WORKLOADS)
    assert bench_compile.CompileTotal.params[0] == all_workloads
    assert bench_execute.ExecuteDeviceTime.params == (all_workloads, list(workloads.SEQ_LENGTHS))
    assert bench_execute.ExecuteHostTime.params[0] == all_workloads
    assert bench_numerics.NumericsStageError.params[0] == all_workloads
    assert bench_compile_work.CompileWork.params[0] == all_workloads
    assert set(workloads.NUMERICS_WIDTHS) >= set(all_workloads)
    for grid in (bench_execute.ExecuteDeviceTime.params[1], bench_numerics.SEQ_LENGTHS,
                 bench_compile_work.SEQ_LENGTHS):
        assert {127, 128} <= set(grid)
    # the host-clock compile rows time seq 128 only: instruction counts cover 127 and 128
    assert bench_compile.CompileTotal.params[1] == bench_compile.CompileStage.params[2] == [128]
    assert 1024 in bench_execute.ExecuteDeviceTime.params[1]  # the [1024, 4096] class
    assert bench_numerics.SEQ_LENGTHS == bench_execute.ExecuteDeviceTime.params[1]


@pytest.mark.parametrize("missing, benchmark, params", [
    ("compile", bench_compile.CompileTotal, ("softmax", 127)),
    ("run_stage", bench_compile.CompileStage, ("kernel", "mlp", 127)),
    ("device_clock", bench_execute.ExecuteDeviceTime, ("softmax", 1)),
])
def test_a_commit_without_the_api_skips(monkeypatch, missing, benchmark, params):
    # an older spyre_sim without the name: gone from the module and from its lazy exports
    monkeypatch.delattr(spyre_sim, missing, raising=False)
    monkeypatch.delitem(spyre_sim._EXPORTS, missing)
    with pytest.raises(NotImplementedError, match=missing):
        benchmark().setup(*params)


def test_a_commit_without_spyre_sim_skips_every_family(monkeypatch):
    monkeypatch.setattr(prepare, "spyre_sim", None)
    with pytest.raises(NotImplementedError):
        bench_execute.ExecuteHostTime().setup("softmax", 1)
    values = bench_numerics.NumericsStageError().setup_cache()
    with pytest.raises(NotImplementedError):
        bench_numerics.NumericsStageError().setup(values, "softmax", 127, "kernel")


def test_a_device_time_sample_is_that_run_s_simulated_time():
    benchmark = bench_execute.ExecuteDeviceTime()
    benchmark.setup("softmax", 1)
    start = benchmark.timer()
    benchmark.time_device("softmax", 1)
    sample = benchmark.timer() - start
    expected = benchmark.program.run(*benchmark.inputs).device_time_us / 1e6
    assert sample == pytest.approx(expected, rel=0.1)  # the noise model: CV 1.5% per run
    assert sample > 0


def test_every_host_clock_sample_is_one_process_relative_to_the_reference():
    for benchmark in (bench_compile.CompileTotal, bench_compile.CompileStage,
                      bench_execute.ExecuteHostTime):
        assert issubclass(benchmark, clocks.ProcessSampled)
        assert benchmark.timer is clocks.process_clock
        assert benchmark.number == 1 and benchmark.warmup_time == 0
        # one sample per benchmark process, in enough rounds for asv's p < 0.002
        assert benchmark.repeat[0] == benchmark.repeat[1] == 1
        assert benchmark.rounds == prepare.CLOCK_ROUNDS >= 7
    assert bench_execute.ExecuteHostTime.clock is clocks.time.perf_counter  # a user's wait
    assert bench_compile.CompileTotal.clock is clocks.time.process_time


def test_each_compile_row_has_a_row_per_judged_part_of_its_wait_and_the_table_knows_each():
    """CPU, children's CPU and blocked time, one row each, every one read by the metric
    that judges that part (regressions/metrics.py)."""
    from benchmarks import waits
    from regressions import metrics

    for benchmark, method in ((bench_compile.CompileTotal, "time_compile"),
                              (bench_compile.CompileStage, "time_stage")):
        for part in waits.JUDGED_PARTS:
            name = method if part == "cpu" else f"{method}_{part}"
            assert callable(getattr(benchmark, name))
            metric = metrics.metric_for(f"bench_compile.{benchmark.__name__}.{name}")
            assert metric.wait_part == part


@pytest.mark.parametrize("workload, seq", sorted(bench_execute.UNTIMED_CALLS))
def test_a_warm_call_too_short_to_time_skips(workload, seq):
    with pytest.raises(NotImplementedError, match="too short to time honestly"):
        bench_execute.ExecuteHostTime().setup(workload, seq)


def test_every_stage_benchmark_runs_once():
    for stage in bench_compile.TIMED_STAGES:
        benchmark = bench_compile.CompileStage()
        benchmark.setup(stage, "attention", 127)
        benchmark.time_stage(stage, "attention", 127)
    total = bench_compile.CompileTotal()
    total.setup("softmax", 127)
    total.time_compile("softmax", 127)


def test_numerics_values_are_errors_against_float64():
    errors = bench_numerics.stage_errors("linear", 127, prepare.EXECUTABLE_STAGES)
    again = bench_numerics.stage_errors("linear", 127, ["kernel"])
    assert errors["kernel"] == again["kernel"]  # deterministic: track_, no statistics needed
    for metrics in errors.values():
        assert 0 < metrics["max_rel"] < 2.0 ** -8  # a few DLFloat16 roundings of the output
        assert 0 < metrics["max_abs"]
        assert 0.9 < metrics["rmse_vs_eager_dlfloat16"] < 1.5  # as accurate as eager DLFloat16
        # DLFloat16 keeps 9 fraction bits to IEEE fp16's 10: about twice eager fp16's error
        assert 1.6 < metrics["rmse_vs_eager_fp16"] < 3.0


def test_a_stage_that_produces_inf_or_nan_fails_naming_where(monkeypatch):
    build = workloads.build

    def loud(name, seq, width=None):
        program, (x,) = build(name, seq, width)
        return program, (x * 1e6,)  # squares to ~1e12, beyond DLFloat16's 8.6e9

    monkeypatch.setattr(workloads, "build", loud)
    errors = bench_numerics.stage_errors("rmsnorm", 1, ["kernel", "runtime"])
    for stage in ("kernel", "runtime"):
        assert errors[stage] == {"nonfinite": f"kernel k0_mul (op mul, stage {stage}, graph 0)"}
    values = {("rmsnorm", 1, "runtime"): errors["runtime"]}
    with pytest.raises(RuntimeError, match="non-finite values .* first produced by kernel k0_"):
        bench_numerics.NumericsStageError().setup(values, "rmsnorm", 1, "runtime")


def test_the_dlfloat16_track_skips_a_commit_without_dlfloat16(monkeypatch):
    monkeypatch.delattr(spyre_sim, "dlfloat16", raising=False)  # an older spyre_sim
    monkeypatch.delitem(spyre_sim._EXPORTS, "dlfloat16")
    errors = bench_numerics.stage_errors("softmax", 1, ["runtime"])
    values = {("softmax", 1, "runtime"): errors["runtime"]}
    bench_numerics.NumericsStageError().setup(values, "softmax", 1, "runtime")
    with pytest.raises(NotImplementedError, match="dlfloat16"):
        bench_numerics.NumericsStageErrorDLFloat16().setup(values, "softmax", 1, "runtime")


PRELOADED = """
import json, os, sys, warnings
warnings.simplefilter("ignore")
sys.argv[1:] = ARGV
from benchmarks import bench_compile, bench_compile_work, bench_execute, bench_numerics, prepare
threads = len(os.listdir("/proc/self/task"))
before = set(sys.modules)
fn, inputs = prepare.workload("attention", 8, 64)
prepare.spyre_sim.compile(fn, inputs).run(*inputs)
late = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("torch", "functorch"))
print(json.dumps({"threads": threads, "late": late, "warmed": list(prepare.WARMED_UP)}))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("argv", [[], ["run_server", "benchmarks", "socket"]],
                         ids=["imported", "forkserver"])
@pytest.mark.slow  # over 4 s: out of the quick loop, still in CI
def test_the_suite_imports_what_a_first_compile_would_and_still_forks_with_one_thread(argv):
    """asv's forkserver imports the suite once and forks every benchmark from it: a first
    compile in the child then imports no torch module of its own, and the server holds one
    thread (OMP_NUM_THREADS=1, as asv.conf.json sets it) when it forks, also after it
    compiled and ran every workload once (`prepare.warm_up_forkserver`, which only the
    forkserver runs)."""
    script = PRELOADED.replace("ARGV", repr(argv))
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                               "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"threads": 1, "late": [],
                     "warmed": list(workloads.SUITE) if argv else []}


def test_max_rel_is_defined_once_the_benchmarks_and_the_reports_agree():
    """The numerics benchmark's max rel (`track_max_rel_error`) and the reports' (the
    reproducer harness, regressions/probing/harness.py) are one quantity with one value."""
    from backends import spyre
    from regressions import metrics
    from regressions.probing import harness

    width = workloads.NUMERICS_WIDTHS["linear"]
    benchmark = bench_numerics.stage_errors("linear", 127, ["runtime"])["runtime"]
    program, inputs = workloads.build("linear", 127, width)
    compiled = spyre.compile(program, inputs)
    reported = harness.output_errors(compiled.run(*inputs).outputs[0],
                                     *compiled.baselines(*inputs))
    assert reported["max_abs"] == pytest.approx(benchmark["max_abs"], rel=1e-12)
    assert reported["max_rel"] == pytest.approx(benchmark["max_rel"], rel=1e-12)
    assert reported["max_rel"] < 2.0 ** -8  # not a per-element ratio near a zero output
    assert "max |out - ref| / max |ref|" in metrics.error_words("max_rel", "", "").definition
