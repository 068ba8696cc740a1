"""Every figure a report quotes, listed once with what it is: the report's "Figures" table.

A number in a report is only readable with four things beside it: the quantity, the program
it was measured on, the clock or counter that read it (and which probe), and the statistic
(a median of n samples, a deterministic value, a sum). Two figures that measure different
things get different names here; one that is quoted twice is one row, formatted by the same
function wherever the text quotes it (`reports.narrative`). tests/e2e/test_demo.py reads the
demo's rendered bundles and checks that every figure of the causal and workaround statements
is a value of this table (or of the per-kernel table), and that no row is named twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from regressions import metrics
from regressions.investigation.model import Comparison, Investigation
from reports.analysis import KernelChanges
from reports.narrative import (
    WELCH,
    WELCH_ONE_SIDED,
    benchmark_program,
    confirmation_figure,
    error_value,
    error_words,
    has_device_clock,
    interval,
    knob_quantity,
    metric_value,
    pvalue,
    quantity,
    wording,
)


@dataclass(frozen=True, kw_only=True)
class Figure:
    quantity: str
    program: str
    measured_by: str  # the clock or counter, and the probe or benchmark that read it
    statistic: str
    good: str
    bad: str
    change: str = ""  # bad / good, with its interval where there is one
    p: str = ""  # the p-value and its test

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.quantity, self.program, self.measured_by, self.statistic)


def _ratio(good: float | None, bad: float | None) -> str:
    return f"×{bad / good:.3f}" if good and bad is not None else ""


def confirmation(found: Investigation) -> list[Figure]:
    c, target = found.confirmation, found.target
    if c is None:
        return []
    metric = metrics.by_name(c.metric)
    statistic = ("one deterministic value per build" if c.pvalue is None else
                 f"median of {c.good_n} / {c.bad_n} samples; ratio of geometric means")
    name, words = metric.label, wording(found)
    if metric.errors and target.error:
        name += f" ({error_words(words, target.error).name})"
    if metric.per_stage and target.stage:
        name += f" of the {target.stage} stage alone"
    return [Figure(quantity=name, program=c.program.describe(),
                   measured_by=f"the benchmark {target.label}"
                   + (f", {metric.clock}" if metric.clock else ""), statistic=statistic,
                   good=metric_value(c.good_median, c.unit, metric, target.error, words=words),
                   bad=metric_value(c.bad_median, c.unit, metric, target.error, words=words),
                   change=confirmation_figure(c),
                   p="exact" if c.pvalue is None else f"{pvalue(c.pvalue)} ({WELCH_ONE_SIDED})")]


def _timed(c: Comparison, program: str, measured_by: str) -> Figure:
    scale, unit = (1e3, "ms") if c.unit == "s" else (1.0, c.unit)
    digits = ".2f" if c.unit == "s" else ".1f"

    def median(side) -> str:
        return "not measured" if side is None else f"{side.median * scale:{digits}} {unit}"

    change = "" if c.ratio is None else \
        f"×{c.ratio:.3f} ({c.confidence:.0%} CI {interval(c.ci)})"
    n = max((s.n for s in (c.good, c.bad) if s), default=0)
    return Figure(quantity=c.name, program=program, measured_by=measured_by,
                  statistic=f"median of {n} synchronized iterations; ratio of geometric means",
                  good=median(c.good), bad=median(c.bad), change=change,
                  p="" if c.pvalue is None else f"{pvalue(c.pvalue)} ({WELCH})")


def timing(found: Investigation) -> list[Figure]:
    timing = found.timing
    program = timing.program.describe()
    rows = [_timed(timing.device, program, "the simulator's device clock, run-to-run noise on "
                                           "(reproducer.py's timing)")] \
        if has_device_clock(timing) else []
    rows.append(_timed(timing.host, program, "the host's wall clock (reproducer.py's timing)"))
    good, bad = (c.errors for c in timing.correctness)
    words = wording(found)
    if good is not None and bad is not None:
        for error in ("rmse_ratio", "max_abs", "max_rel"):
            named = error_words(words, error)
            rows.append(Figure(quantity=named.name, program=program,
                               measured_by=f"the output against float64 ({named.definition})",
                               statistic="one deterministic value per build (fixed seeds)",
                               good=error_value(getattr(good, error), error, words),
                               bad=error_value(getattr(bad, error), error, words),
                               change=_ratio(getattr(good, error), getattr(bad, error))))
    return rows


def evidence(found: Investigation, kernels: KernelChanges) -> list[Figure]:
    """The stage probe's figures, on the benchmark program: noise-free device time, kernel
    time, the first divergent stage's compile figures, the drifting stage's error."""
    stages, program = found.stages, benchmark_program(found).describe()
    rows = []
    device = stages.device_time_us or {}
    if device.get("good") is not None and device.get("bad") is not None:
        rows.append(Figure(quantity="noise-free simulated device time per call (kernels, launch "
                                    "gaps and transfers)", program=program,
                           measured_by="the simulator, noise off (stage probe)",
                           statistic="one deterministic run", good=quantity(device["good"], "us"),
                           bad=quantity(device["bad"], "us"),
                           change=_ratio(device["good"], device["bad"])))
    if kernels.any:
        rows.append(Figure(quantity="kernel execution time per call, summed over the kernels",
                           program=program,
                           measured_by="the simulator, noise off (stage probe)",
                           statistic="sum over kernels",
                           good=f"{kernels.good_total_us:.1f} us",
                           bad=f"{kernels.bad_total_us:.1f} us",
                           change=_ratio(kernels.good_total_us, kernels.bad_total_us)))
    row = next((d for d in stages.stages if d.stage == stages.first_divergent_stage), None)
    if row is not None and found.target.measures.per_stage:  # compile alerts quote these
        rows.append(Figure(quantity=f"{found.target.measures.stage_figure} of the {row.stage} "
                                    "stage per cold compile",
                           program=program,
                           measured_by=("the host's wall clock" if stages.wait_part is None else
                                        "the kernel's accounting of the compile's wall time") +
                                       " (stage probe: repeated compiles of the whole pipeline)",
                           statistic="median of repeated compiles",
                           good=quantity(row.compile_s_good, "s"),
                           bad=quantity(row.compile_s_bad, "s"),
                           change=_ratio(row.compile_s_good, row.compile_s_bad),
                           p="" if row.compile_p is None else
                             f"{pvalue(row.compile_p)} (two-sided Mann-Whitney)"))
        if row.instructions_good is not None and row.instructions_bad is not None:
            rows.append(Figure(quantity=f"instructions executed by the {row.stage} stage per cold "
                                        "compile", program=program,
                               measured_by="callgrind (valgrind), counted per stage",
                               statistic="one count per build (repeat runs agree within "
                                         f"{metrics.instruction_counts().tolerance:.0%})",
                               good=quantity(row.instructions_good, "instructions"),
                               bad=quantity(row.instructions_bad, "instructions"),
                               change=f"{row.work_growth:+.2%}" if row.work_growth is not None
                                      else ""))
    return rows + _drift(found, program)


def _drift(found: Investigation, program: str) -> list[Figure]:
    stage = found.stages.numerics_first_divergent_stage
    numerics = found.stages.numerics or {}
    good = (numerics.get("good") or {}).get(stage or "") or {}
    bad = (numerics.get("bad") or {}).get(stage or "") or {}
    if not stage or good.get("rmse_ratio") is None or bad.get("rmse_ratio") is None:
        return []
    words = wording(found)
    named = error_words(words, "rmse_ratio")
    return [Figure(quantity=f"{named.name} of the {stage} stage's output", program=program,
                   measured_by=f"the output against float64 ({named.definition}; stage probe)",
                   statistic="one deterministic value per build",
                   good=error_value(good["rmse_ratio"], "rmse_ratio", words),
                   bad=error_value(bad["rmse_ratio"], "rmse_ratio", words),
                   change=_ratio(good["rmse_ratio"], bad["rmse_ratio"]))]


def workaround(found: Investigation) -> list[Figure]:
    w = found.workaround
    if w is None:
        return []
    metric, words = metrics.by_name(w.metric), wording(found)

    def value(x: float) -> str:
        return metric_value(x, w.unit, metric, found.target.error, words=words)

    name = knob_quantity(metric, found.target.stage)
    return [Figure(quantity=name, program=w.program.describe(),
                   measured_by="the knob probe at the bad build (the good build's: its level "
                               "times the stage probe's good/bad ratio)",
                   statistic="one run per knob value", good=value(w.metric_good),
                   bad=value(w.metric_bad), change=f"with {words.knob_setting(w.knob, w.value)}: "
                   f"{value(w.metric_with_knob)}, recovering {w.recovered:.0%}")]


def minimized(found: Investigation) -> list[Figure]:
    m = found.minimized
    if m is None:
        return []
    label = found.target.measures.label
    return [Figure(quantity=f"bad / good ratio of the noise-free {label}",
                   program=f"the captured program ({m.ops_before} ATen op(s)) and the "
                           f"minimized one ({m.ops_after})",
                   measured_by="the minimizer's probes (noise off)",
                   statistic="one deterministic run per build and program", good="", bad="",
                   change=f"{m.ratio_before:.3f} captured → {m.ratio_after:.3f} minimized")]


def related(found: Investigation) -> list[Figure]:
    """The culprit's other symptoms, as the causal statement quotes them."""
    rows, words = [], wording(found)
    for r in found.related:
        c = r.confirmation
        if c is None:
            continue
        metric = metrics.by_name(c.metric)
        # the related alert's own error (max rel, RMSE ratio, ...), not the target's
        error = metrics.numerics_error(r.alert.probe.benchmark) if metric.errors else None
        rows.append(Figure(quantity=metric.label, program=c.program.describe(),
                           measured_by=f"the benchmark {r.alert.probe.name} (another alert of "
                                       "this culprit)",
                           statistic="one deterministic value per build" if c.pvalue is None
                           else f"median of {c.good_n} / {c.bad_n} samples; ratio of geometric "
                                "means",
                           good=metric_value(c.good_median, c.unit, metric, error, words=words),
                           bad=metric_value(c.bad_median, c.unit, metric, error, words=words),
                           change=confirmation_figure(c),
                           p="exact" if c.pvalue is None else
                             f"{pvalue(c.pvalue)} ({WELCH_ONE_SIDED})"))
    return rows


def figures(found: Investigation, kernels: KernelChanges) -> tuple[Figure, ...]:
    """Every figure of the report, each once, in the order the report quotes them."""
    return tuple([*confirmation(found), *timing(found), *evidence(found, kernels),
                  *workaround(found), *minimized(found), *related(found)])
