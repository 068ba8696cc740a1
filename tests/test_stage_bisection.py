"""Stage bisection as pure functions, on hand-made captures and stage probes' answers."""

import pytest

from regressions.bisection import stages
from regressions.bisection.stages import Capture
from regressions.probing.protocol import KernelTime, StageAnswer

STAGES = ("dynamo", "decompose", "lower", "layout", "kernel")


def _capture(texts):
    return Capture(STAGES, dict(zip(STAGES, texts, strict=True)), {s: 0.0 for s in STAGES})


def _probe(times, errors=None, kernels=(("k0", 10.0),), device=10.0):
    return StageAnswer(status="ok",
                       compile_times=tuple(dict(zip(STAGES, t, strict=True)) for t in times),
                       device_time_us=device,
                       kernels=tuple(KernelTime(n, t) for n, t in kernels), stages=STAGES,
                       stage_errors=errors or {})


def test_the_first_artifact_that_differs_is_named_with_its_diff():
    good = _capture(["g\n", "d\n", "l\n", "a\nb\n", "k1\n"])
    bad = _capture(["g\n", "d\n", "l\n", "a\nc\n", "k2\n"])
    timing = [[0.1] * 5] * 4
    report = stages.bisect_stages(good, bad, _probe(timing), _probe(timing), good="g", bad="b",
                                  workload="mlp",
                                  seq=127, width=1024)
    assert report.first_divergent_stage == "layout" and report.basis == "artifact"
    assert report.stage_diff_lines == 2
    assert "-b" in report.diff and "+c" in report.diff


def test_identical_artifacts_fall_back_to_the_stage_that_added_compile_time():
    same = _capture(["x\n"] * 5)
    good_times = [[0.1, 0.010, 0.0002, 0.001, 0.005]] * 5
    bad_times = [[0.1, 0.011, 0.0030, 0.001, 0.005], [0.1, 0.010, 0.0031, 0.001, 0.005],
                 [0.1, 0.010, 0.0029, 0.001, 0.005], [0.1, 0.011, 0.0032, 0.001, 0.005],
                 [0.1, 0.010, 0.0030, 0.001, 0.005]]
    report = stages.bisect_stages(same, same, _probe(good_times), _probe(bad_times), good="g",
                                  bad="b",
                                  workload="attention", seq=128, width=1024)
    assert report.first_divergent_stage == "lower" and report.basis == "compile_clock"


def test_a_busier_machine_does_not_name_the_largest_stage():
    """The bad build's probe ran beside a neighbour: every stage 1.6x slower, and decompose
    3x slower on top. Dynamo's 100 ms gained more seconds than decompose's 10 ms, but only
    decompose slowed more than the machine did."""
    same = _capture(["x\n"] * 5)
    good_times = [[0.100 + 0.001 * i, 0.010, 0.0002, 0.001, 0.005] for i in range(4)]
    bad_times = [[0.160 + 0.001 * i, 0.048 + 0.001 * i, 0.00032, 0.0016, 0.008]
                 for i in range(4)]
    report = stages.bisect_stages(same, same, _probe(good_times), _probe(bad_times), good="g",
                                  bad="b",
                                  workload="attention", seq=128, width=1024)
    assert (report.first_divergent_stage, report.basis) == ("decompose", "compile_clock")
    # the same drift with no stage slower than the rest names none
    busy = [[0.160 + 0.001 * i, 0.016, 0.00032, 0.0016, 0.008] for i in range(4)]
    report = stages.bisect_stages(same, same, _probe(good_times), _probe(busy), good="g", bad="b",
                                  workload="attention", seq=128, width=1024)
    assert (report.first_divergent_stage, report.basis) == (None, None)


def test_a_clock_that_moved_without_more_work_names_no_stage():
    """The same slower clock as above, but every stage counted and none executing more: the
    builds do the same work, so the rise is the machine's, and the investigation refutes a
    compile-time alert on it."""
    same = _capture(["x\n"] * 5)
    good_times = [[0.1, 0.010, 0.0002, 0.001, 0.005]] * 5
    bad_times = [[0.1, 0.010, 0.0030 + 0.0001 * i, 0.001, 0.005] for i in range(5)]
    counts = {"dynamo": 900_000_000, "decompose": 40_000_000, "lower": 10_000_000,
              "layout": 20_000_000, "kernel": 30_000_000}
    jitter = {**counts, "lower": 10_050_000}  # +0.5%: within the tolerance
    report = stages.bisect_stages(same, same, _probe(good_times), _probe(bad_times), good="g",
                                  bad="b",
                                  workload="attention", seq=128, width=1024,
                                  instructions=(counts, jitter))
    assert (report.first_divergent_stage, report.basis) == (None, None)
    assert stages.work_unchanged(report)
    uncounted = stages.bisect_stages(same, same, _probe(good_times), _probe(bad_times), good="g",
                                     bad="b", workload="attention", seq=128, width=1024)
    assert uncounted.basis == "compile_clock" and not stages.work_unchanged(uncounted)


def test_numerics_divergence_is_the_first_stage_whose_error_grows():
    good = {s: {"rmse_ratio": 1.0} for s in ("decompose", "lower", "layout", "kernel", "runtime")}
    bad = {**good, "kernel": {"rmse_ratio": 1.6}, "runtime": {"rmse_ratio": 1.6}}
    assert stages.numerics_divergence(good, bad) == "kernel"
    assert stages.numerics_divergence(good, good) is None
    # the pipeline's order when given, whatever order the errors came in
    pipeline = ("dynamo", "decompose", "lower", "layout", "kernel", "sdsc", "backend", "runtime")
    reversed_bad = dict(reversed(list(bad.items())))
    assert stages.numerics_divergence(good, reversed_bad) == "kernel"
    assert stages.numerics_divergence(dict(reversed(list(good.items()))), bad) == "runtime"
    assert stages.numerics_divergence(dict(reversed(list(good.items()))), bad,
                                      stages=pipeline) == "kernel"


def test_the_log_excerpt_is_the_divergent_stages_logger():
    log = ("spyre_sim.lower DEBUG fused 3 ops\nspyre_sim.kernel DEBUG split N\n"
           "spyre_sim.lowering DEBUG not the lower stage\n")
    assert stages._log_excerpt(log, "lower") == "spyre_sim.lower DEBUG fused 3 ops"
    assert stages._log_excerpt(log, None) == ""


def test_kernel_deltas_sort_by_change():
    deltas = stages.kernel_deltas([KernelTime("a", 10), KernelTime("b", 5)],
                                  [KernelTime("a", 11), KernelTime("c", 50)])
    assert [d.name for d in deltas] == ["c", "b", "a"]


def test_a_kernel_the_model_could_not_time_is_kept_by_name_and_out_of_every_total():
    """A backend's unmodelled kernel (NaN time, its name saying why) survives the probe's
    JSON as None, is listed apart and counts in no sum (torch-spyre's SDSC reader)."""
    import math
    from types import SimpleNamespace

    from regressions import codec
    from reports.analysis import kernel_changes

    untimed = KernelTime.of(SimpleNamespace(name="unmodelled kernel: conv7d (x)",
                                            time_us=math.nan, bound="unmodelled", cores=2))
    assert untimed.time_us is None
    assert codec.from_json(KernelTime, codec.to_json(untimed)) == untimed
    deltas = stages.kernel_deltas([KernelTime("a", 10), untimed],
                                  [KernelTime("a", 12), untimed])
    assert [(d.name, d.unmodelled) for d in deltas] == [("a", False), (untimed.name, True)]
    changes = kernel_changes(deltas)
    assert (changes.removed, changes.added, changes.unmodelled) == ((), (), (untimed.name,))
    assert (changes.good_total_us, changes.bad_total_us) == (10, 12)


def test_instruction_counts_name_the_stage_that_did_more_work():
    # wall times say nothing (a millisecond stage, noise), the counts say lower did 4% more
    same = _capture(["x\n"] * 5)
    times = [[0.1, 0.010, 0.0003, 0.001, 0.005]] * 5
    good = {"dynamo": 900_000_000, "decompose": 40_000_000, "lower": 10_000_000,
            "layout": 20_000_000, "kernel": 30_000_000}
    bad = {**good, "lower": 10_400_000, "layout": 20_040_000}  # layout +0.2%: noise
    report = stages.bisect_stages(same, same, _probe(times), _probe(times), good="g", bad="b",
                                  workload="attention", seq=128, width=1024,
                                  instructions=(good, bad))
    assert (report.first_divergent_stage, report.basis) == ("lower", "instructions")
    lower = next(d for d in report.stages if d.stage == "lower")
    assert lower.work_growth == pytest.approx(0.04)
    # without counts the same builds name nothing
    report = stages.bisect_stages(same, same, _probe(times), _probe(times), good="g", bad="b",
                                  workload="attention", seq=128, width=1024)
    assert report.first_divergent_stage is None


def test_a_pass_only_one_build_has_is_compared_where_it_runs_in_the_other():
    """torch-spyre adds and removes passes between commits: a pass the bad build added is
    compared with the good build's program at the same point of its pipeline (after the
    stage before it), so a pass that leaves the program alone is not a divergence; where a
    pass the bad build lost had changed the program, the builds part there."""
    good = Capture(("lower", "p1", "p3", "codegen"),
                   {"lower": "a\n", "p1": "b\n", "p3": "c\n", "codegen": "k\n"}, {})
    bad = Capture(("lower", "p1", "p2", "codegen"),
                  {"lower": "a\n", "p1": "b\n", "p2": "b\n", "codegen": "k2\n"}, {})
    assert stages.merged_stages(good.stages, bad.stages) == ("lower", "p1", "p2", "p3",
                                                             "codegen")
    order = stages.merged_stages(good.stages, bad.stages)
    assert stages.text_at(good, "p2", order) == "b\n"  # the good build's program after p1
    assert stages.text_at(bad, "p3", order) == "b\n"  # the bad build's, after p2
    probe = StageAnswer(status="ok",
                        compile_times=({"lower": 0.1, "p1": 0.1, "p3": 0.1, "codegen": 0.1},) * 3,
                        device_time_us=None, kernels=(), stages=good.stages, stage_errors={})
    report = stages.bisect_stages(good, bad, probe, probe, good="g", bad="b", workload="mlp",
                                  seq=128, width=None)
    assert report.first_divergent_stage == "p3"  # c there, b in the bad build's program
    alike = Capture(("lower", "p1", "p2", "p3", "codegen"), {**good.texts, "p2": "b\n"}, {})
    assert stages.bisect_stages(good, alike, probe, probe, good="g", bad="b", workload="mlp",
                                seq=128, width=None
                                ).first_divergent_stage is None  # p2 added, changing nothing


def test_a_compile_that_fails_names_the_stage_it_failed_in_and_keeps_its_error():
    from regressions.probing.protocol import Failed

    good = _capture(["g\n", "d\n", "l\n", "a\n", "k\n"])
    failed = Failed("failed", "torch-spyre failed in lower: TypeError: boom", stage="lower")
    report = stages.failure_report(good, _probe([[0.1] * 5] * 3), failed, good="g", bad="b",
                                   workload="swiglu", seq=128)
    assert (report.first_divergent_stage, report.basis) == ("lower", "compile_error")
    assert report.log_excerpt == failed.detail and report.diff == ""
    assert report.device_time_us["bad"] is None
    unnamed = stages.failure_report(good, _probe([[0.1] * 5] * 3), Failed("failed", "x"),
                                    good="g", bad="b", workload="swiglu", seq=128)
    assert (unnamed.first_divergent_stage, unnamed.basis) == (None, None)


def _waits_probe(parts_per_compile, counted=None):
    """A stage probe whose compiles' stage clocks are all alike and whose `compile_waits`
    are given: per compile, stage -> {part: seconds}."""
    times = [[0.1, 0.010, 0.0003, 0.001, 0.005]] * len(parts_per_compile)
    probe = _probe(times)
    waits = tuple({stage: {"wall": 0.0, "cpu": 0.0, "children_cpu": 0.0, "run_queue": 0.0,
                           "blocked": 0.0, **compile.get(stage, {})} for stage in STAGES}
                  for compile in parts_per_compile)
    return StageAnswer(**{**probe.__dict__, "compile_waits": waits})


def test_a_stage_that_now_waits_is_named_on_its_blocked_time_though_it_does_no_more_work():
    same = _capture(["x\n"] * 5)
    good = _waits_probe([{"kernel": {"blocked": 0.0002 + 0.0001 * i}} for i in range(4)])
    bad = _waits_probe([{"kernel": {"blocked": 0.0002 + 0.0001 * i},
                         "layout": {"blocked": 0.050 + 0.0001 * i}} for i in range(4)])
    counts = {s: 1_000_000 for s in STAGES}  # counted: no stage does more work
    report = stages.bisect_stages(same, same, good, bad, good="g", bad="b", workload="mlp",
                                  seq=128, width=1024, instructions=(counts, counts),
                                  wait_part="blocked")
    assert (report.first_divergent_stage, report.basis, report.wait_part) == (
        "layout", "wait", "blocked")
    layout = next(d for d in report.stages if d.stage == "layout")
    assert layout.compile_s_bad == pytest.approx(0.05015)  # the part's median, not the clock
    # read on the CPU the same builds name nothing: no stage executes more instructions
    report = stages.bisect_stages(same, same, good, bad, good="g", bad="b", workload="mlp",
                                  seq=128, width=1024, instructions=(counts, counts),
                                  wait_part="cpu")
    assert report.first_divergent_stage is None and report.wait_part is None


def test_a_stage_whose_child_process_burns_more_is_named_on_children_cpu():
    same = _capture(["x\n"] * 5)
    good = _waits_probe([{"kernel": {"children_cpu": 0.20 + 0.001 * i}} for i in range(4)])
    bad = _waits_probe([{"kernel": {"children_cpu": 0.40 + 0.001 * i}} for i in range(4)])
    report = stages.bisect_stages(same, same, good, bad, good="g", bad="b", workload="mlp",
                                  seq=128, width=1024, wait_part="children_cpu")
    assert (report.first_divergent_stage, report.basis) == ("kernel", "wait")


def test_a_part_that_moves_less_than_its_floor_names_no_stage():
    """Blocked time grew by 1 ms in every compile: significant, but under the floor below
    which the benchmarks read a part as its floor (waits.FLOORS)."""
    same = _capture(["x\n"] * 5)
    good = _waits_probe([{"kernel": {"blocked": 0.0001 * i}} for i in range(4)])
    bad = _waits_probe([{"kernel": {"blocked": 0.001 + 0.0001 * i}} for i in range(4)])
    report = stages.bisect_stages(same, same, good, bad, good="g", bad="b", workload="mlp",
                                  seq=128, width=1024, wait_part="blocked")
    assert report.first_divergent_stage is None
