"""What a report says, as plain (unescaped) text: the model both renderers share.

`build_report` turns a (scrubbed) `Investigation` into a `Report`. Every figure comes from the
investigation and is quoted with what it was measured on, through one formatting function per
kind of figure, so the title, the cards, the causal statement and the demo's table agree. The
causal statement follows the compiler-debugging guide: name the first divergent stage and the
commit, say what changed there, and give the measured cost with its interval on the named
benchmark. The workaround is a separate statement, because a knob that avoids a decision does
not repair the decision ("separate a local workaround from the compiler defect").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backends import interface
from regressions import metrics
from regressions.investigation.model import Confirmation, Investigation, Program, Timing, Workaround
from reports.analysis import KernelChanges, config_differences, kernel_changes

MAX_NAMES = 6  # kernel names listed inline before "and N more"
WELCH = "two-sided Welch t-test on log samples"
WELCH_ONE_SIDED = "one-sided Welch t-test on log samples"
MAX_INLINE_MEMBERS = 8


@dataclass(frozen=True, kw_only=True)
class Report:
    investigation: Investigation
    repo_name: str
    title: str
    headline: tuple[str, str, str]  # label, value, detail (the confirmation)
    causal_statement: str
    workaround_statement: str
    kernels: KernelChanges
    config_changes: Mapping[str, list]
    numerics_rows: tuple[Mapping[str, Any], ...]
    notes: Mapping[str, str]  # captions both renderers print

    @property
    def metric(self) -> metrics.Metric:
        return self.investigation.target.measures

    @property
    def culprit(self):
        return self.investigation.commits.culprit

    @property
    def first_stage(self) -> str | None:
        return self.investigation.stages.first_divergent_stage

    @property
    def numerics_stage(self) -> str | None:
        return self.investigation.stages.numerics_first_divergent_stage

    @property
    def section_order(self) -> tuple[str, ...]:
        return self.metric.sections

    @property
    def wording(self) -> interface.Wording:
        return wording(self.investigation)

    @property
    def show_stage_errors(self) -> bool:
        """The per-stage error table is evidence for numerics alerts or when an output drifts;
        otherwise one sentence says that nothing drifts."""
        return bool(self.numerics_rows) and (self.metric.errors
                                             or self.numerics_stage is not None)


def wording(found: Investigation) -> interface.Wording:
    """How this report names the measuring backend's eager baseline and settings."""
    return interface.wording(found.backend)


def short(sha: str | None) -> str:
    return (sha or "?")[:12]


def listing(names: Sequence[str], limit: int = MAX_NAMES) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def quantity(value: float | None, unit: str, display: metrics.Display = "ms") -> str:
    """A measured value in a readable unit: seconds as us where the metric shows them so
    (device time), other times in ms or s."""
    if value is None:
        return "n/a"
    if unit == "s":
        if display == "us":
            return f"{value * 1e6:.1f} us"
        return f"{value * 1e3:.2f} ms" if value < 10 else f"{value:.2f} s"
    if unit == "us":
        return f"{value:.1f} us"
    if unit == "instructions":
        return f"{value / 1e6:.3f} M instructions"
    return f"{value:.4g}" + (f" {unit}" if unit else "")


def error_words(words: interface.Wording, error: str | None) -> metrics.NumericsError:
    """Error `error` (the RMSE ratio when None) named with the backend's eager baseline."""
    return metrics.error_words(error or "rmse_ratio", words.eager, words.eager_run)


def error_value(value: float | None, error: str | None, words: interface.Wording) -> str:
    """A numerical error with what it is: "1.378× eager DLFloat16's RMSE", "0.00323 max abs
    error". Four significant digits everywhere one is quoted."""
    if value is None:
        return "n/a"
    return f"{value:.4g}{error_words(words, error).unit}"


def metric_value(value: float | None, unit: str, metric: metrics.Metric,
                 error: str | None, words: interface.Wording) -> str:
    """A value of `metric` in its readable unit, or with what it is for an error."""
    return error_value(value, error, words) if metric.errors else quantity(value, unit,
                                                                           metric.display)


def benchmark_program(found: Investigation) -> Program:
    """The catalogue's program the stage and knob probes build, as the benchmark does."""
    return Program(found.target.workload, found.stages.seq, found.stages.width, "benchmark")


def interval(ci: Sequence[float | None] | None, digits: int = 3) -> str:
    if not ci or any(x is None for x in ci):
        return "no interval"
    return f"{ci[0]:.{digits}f}-{ci[1]:.{digits}f}"


def pvalue(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


def confirmation_figure(c: Confirmation) -> str:
    """The regression's size, as the title and the demo's table quote it."""
    if c.pvalue is None:
        return f"×{c.ratio:.3f} (exact)"
    return f"×{c.ratio:.3f} ({c.confidence:.0%} CI {interval(c.ci)})"


def confirmation_sentence(found: Investigation) -> str:
    c, target = found.confirmation, found.target
    if c is None:
        return f"the benchmark {target.label} fails at the culprit and runs at its parent"
    metric = metrics.by_name(c.metric)
    clock = metric.clock
    samples = ("one deterministic value per build" if c.pvalue is None else
               f"{clock + ', ' if clock else ''}medians of {c.good_n} and {c.bad_n} samples, "
               f"p = {pvalue(c.pvalue)}, {WELCH_ONE_SIDED}")
    words = wording(found)
    good = metric_value(c.good_median, c.unit, metric, target.error, words=words)
    bad = metric_value(c.bad_median, c.unit, metric, target.error, words=words)
    return (f"the benchmark {target.label}, on {c.program.describe()}, measured {good} at the "
            f"parent and {bad} at the culprit "
            f"({samples}): {confirmation_figure(c)}")


def change_sentence(metric: metrics.Metric, where: str, good: float | None,
                    bad: float | None, floor: float = 0.0) -> str:
    """What grew, in the metric's words (`Metric.change`): "the sdsc stage now waits 50.08
    ms more per compile, blocked (0.01 ms → 50.09 ms)". A good value at the part's `floor`
    (the least a benchmark sample reads) is that much or less, so the growth is at least the
    rest."""
    if good is None or bad is None:
        return ""
    at_floor = floor > 0 and good <= floor * (1 + 1e-6)
    delta = ("at least " if at_floor else "") + quantity(bad - good, "s")
    before = f"{quantity(good, 's')} or less, the floor" if at_floor else quantity(good, "s")
    text = metric.change.format(where=where, delta=delta, good=before,
                                bad=quantity(bad, "s"))
    return text[:1].upper() + text[1:]


def part_change(found: Investigation) -> str:
    """For a regression in a part of a compile's wall time other than its CPU (its
    children's CPU, its blocked time): which part moved and by how much, per compile, as the
    confirmation measured it."""
    metric, c, target = found.target.measures, found.confirmation, found.target
    if metric.wait_part in (None, "cpu") or c is None:
        return ""
    where = f"the {target.stage} stage" if target.stage else \
        f"a compile of {c.program.describe()}"
    return change_sentence(metric, where, c.good_median, c.bad_median,
                           floor=metrics.wait_floor(metric)) + "."


def has_device_clock(timing: Timing) -> bool:
    """Whether the compiler measured reads a device clock: False only when both builds ran
    and neither gave a device time (Inductor's CPU code), so a failed build is still shown as
    a device time "not measured"."""
    return not (timing.good.ok and timing.bad.ok and not timing.good.device_us
                and not timing.bad.device_us)


def compiler_name(found: Investigation) -> str:
    """The compiler a report is about, in titles and instructions: the repository's package
    in the backend's compiler's place where there is one, else the backend."""
    return found.compiler.split(".")[0] if found.compiler else found.backend


def timing_sentence(timing: Timing, metric: metrics.Metric, words: interface.Wording) -> str:
    """The synchronized iterations of the reproducer's program, bad against good."""
    device, program = timing.device, timing.program.describe()
    if metric.errors:
        good, bad = (c.errors for c in timing.correctness)
        if good is None or bad is None:
            return f"on {program} the error could not be compared (a build did not run)"
        return (f"on {program} the output's RMSE against float64 went from "
                f"{good.rmse_ratio:.4g}× to {bad.rmse_ratio:.4g}× {words.eager}'s (max abs "
                f"error {good.max_abs:.4g} → {bad.max_abs:.4g}; fixed seeds, so these repeat "
                "exactly)")
    if timing.good.ok and timing.bad.ok and not (timing.good.host_s or timing.good.device_us):
        return (f"on {program} the compiled program does not run here (its device is not "
                "on this machine): the compile is what was measured")
    if not has_device_clock(timing):
        host = timing.host
        if host.ratio is None or host.good is None or host.bad is None:
            return f"on {program} the host time could not be compared"
        return (f"on {program}, host wall time per call went from "
                f"{host.good.median * 1e3:.3f} ms to {host.bad.median * 1e3:.3f} ms (medians "
                f"of {host.good.n} and {host.bad.n} synchronized iterations): "
                f"×{host.ratio:.3f}, {host.confidence:.0%} CI {interval(host.ci)}")
    if device.ratio is None or device.good is None or device.bad is None:
        return f"on {program} the device time could not be compared (a build did not run)"
    return (f"on {program}, simulated device time per call went from "
            f"{device.good.median:.1f} us to {device.bad.median:.1f} us (medians of "
            f"{device.good.n} and {device.bad.n} synchronized iterations): ×{device.ratio:.3f}, "
            f"{device.confidence:.0%} CI {interval(device.ci)}")


def _where(found: Investigation) -> str:
    culprit, bisect = found.commits.culprit, found.bisect
    if culprit is not None:
        return f"Commit {short(culprit.sha)} (\"{culprit.subject}\") is the first bad commit"
    candidates = bisect.candidates if bisect else []
    text = (f"The regression lies between {short(found.commits.good.sha)} and "
            f"{short(found.commits.bad.sha)} (no single culprit was isolated")
    return text + (f"; candidates: {listing([short(c) for c in candidates])})" if candidates
                   else ")")


def _stage_clause(found: Investigation) -> str:
    stages = found.stages
    first = stages.first_divergent_stage
    if first and stages.basis == "artifact":
        return (f"the first compiler stage whose canonical artifact differs between the good "
                f"and the bad build is {first} ({stages.stage_diff_lines} changed lines)")
    if first and stages.basis == "instructions":
        return (f"no stage artifact differs; the stage whose instruction count grew most is "
                f"{first}")
    if first and stages.basis == "compile_clock":
        return (f"no stage artifact differs; the first stage whose compile time grew "
                f"significantly is {first}")
    if first and stages.basis == "wait":
        return (f"no stage artifact differs; the stage whose "
                f"{found.target.measures.stage_figure} grew most is {first}")
    if first and stages.basis == "compile_error":
        return (f"the bad build's compile fails in the {first} stage, where the good build's "
                "compiles")
    return ("no compiler stage artifact or stage compile time differs, so the divergence lies "
            "outside the compile stages")


def _kernel_sentences(found: Investigation, kernels: KernelChanges) -> list[str]:
    """How the compiled kernels changed, and which the timing model could not time."""
    sentences = []
    if kernels.any:
        parts = []
        if kernels.removed:
            parts.append(f"removed {listing(list(kernels.removed))}")
        if kernels.added:
            parts.append(f"added {listing(list(kernels.added))}")
        if kernels.changed:
            parts.append("retimed " + listing([f"{n} ({g:.1f} → {b:.1f} us)"
                                               for n, g, b in kernels.changed]))
        sentences.append(f"Its compiled kernels changed ({'; '.join(parts)}): their execution "
                         f"time per call, summed over the kernels, went from "
                         f"{kernels.good_total_us:.1f} us to {kernels.bad_total_us:.1f} us "
                         f"(noise-free, on {benchmark_program(found).describe()}; the device "
                         "time per call adds launch gaps and transfers).")
    if kernels.unmodelled:
        sentences.append(f"{len(kernels.unmodelled)} kernel(s) the timing model could not time "
                         f"are in none of these figures: {listing(list(kernels.unmodelled))}.")
    return sentences


def _what_changed(found: Investigation, kernels: KernelChanges,
                  changes: Mapping[str, list], numerics_rows: Sequence[Mapping]) -> str:
    sentences = []
    if changes:
        sentences.append(f"The default {wording(found).config} changed: " + ", ".join(
            f"{name} {values[0]!r} → {values[1]!r}" for name, values in changes.items()) + ".")
    sentences += _kernel_sentences(found, kernels)
    stage = found.stages.numerics_first_divergent_stage
    if stage:
        row = next((r for r in numerics_rows if r["stage"] == stage), None)
        detail = ""
        if row and row["good"] is not None and row["bad"] is not None:
            detail = (f" (RMSE {row['good']:.4g}× → {row['bad']:.4g}× {wording(found).eager}'s, on "
                      f"{benchmark_program(found).describe()})")
        sentences.append(f"The first executed stage output that drifts further from float64 "
                         f"is {stage}'s{detail}.")
    if found.stages.basis == "instructions":
        delta = next(d for d in found.stages.stages
                     if d.stage == found.stages.first_divergent_stage)
        sentences.append(f"The {delta.stage} stage produces the same artifact with more work: "
                         f"{quantity(delta.instructions_good, 'instructions')} → "
                         f"{quantity(delta.instructions_bad, 'instructions')} "
                         f"({delta.work_growth:+.2%}) per cold compile of "
                         f"{benchmark_program(found).describe()}, counted under callgrind "
                         f"(repeat runs agree within "
                         f"{metrics.instruction_counts().tolerance:.0%}).")
    if found.stages.basis == "wait":
        delta = next(d for d in found.stages.stages
                     if d.stage == found.stages.first_divergent_stage)
        sentences.append(change_sentence(found.target.measures, f"the {delta.stage} stage",
                                         delta.compile_s_good, delta.compile_s_bad)
                         + f" (on {benchmark_program(found).describe()}, medians of repeated "
                         f"compiles; p = {pvalue(delta.compile_p)}, two-sided Mann-Whitney).")
    if found.stages.basis == "compile_error" or (found.confirmation is None
                                            and found.stages.log_excerpt):
        sentences.append(f"The error: {found.stages.log_excerpt}")
    if found.stages.basis == "compile_clock":
        delta = next(d for d in found.stages.stages
                     if d.stage == found.stages.first_divergent_stage)
        sentences.append(f"The {delta.stage} stage produces the same artifact, only more "
                         f"slowly: {quantity(delta.compile_s_good, 's')} → "
                         f"{quantity(delta.compile_s_bad, 's')} of wall time per cold compile "
                         f"of {benchmark_program(found).describe()} (medians of repeated "
                         f"compiles; p = {pvalue(delta.compile_p)}, two-sided Mann-Whitney).")
    return " ".join(sentences)


def causal_statement(found: Investigation, kernels: KernelChanges,
                     changes: Mapping[str, list], numerics_rows: Sequence[Mapping]) -> str:
    """One paragraph: stage and commit, what changed there, the cost, correctness, scope."""
    members = found.alert.members
    labels = [m.name for m in members]
    scope = (f"The alert covers {len(members)} benchmark(s): {', '.join(labels)}."
             if len(members) <= MAX_INLINE_MEMBERS else
             f"The alert covers {len(members)} benchmarks, all listed below.")
    good, bad = found.timing.correctness
    verdict = (f"Correctness against float64 at the stated tolerance: good {good.verdict}, "
               f"bad {bad.verdict}." if {good.verdict, bad.verdict} != {"not measured"} else
               "Correctness against float64: not measured (the compiled program runs only on "
               "the device).")
    provisional = ("Provisional: the change is in the newest benchmarked commit, so one "
                   "commit holds the new level; later nights confirm or withdraw it "
                   "(`spyre-regress alerts`)." if found.alert.provisional else "")
    parts = [
        f"{_where(found)}; {_stage_clause(found)}.",
        part_change(found),
        _what_changed(found, kernels, changes, numerics_rows),
        f"Measured: {confirmation_sentence(found)}; "
        f"{timing_sentence(found.timing, found.target.measures, wording(found))}.",
        verdict,
        scope,
        related_sentence(found),
        provisional,
    ]
    return " ".join(p for p in parts if p)


def related_sentence(found: Investigation) -> str:
    """The culprit's other symptoms: alerts whose bisection named the same commit."""
    if not found.related:
        return ""
    parts = []
    for r in found.related:
        figure = confirmation_figure(r.confirmation) if r.confirmation else "fails"
        where = f", first divergent stage {r.first_divergent_stage}" \
            if r.first_divergent_stage else ""
        label = metrics.label_of(r.alert.kind)
        parts.append(f"{label} ({len(r.alert.members)} benchmark(s), {r.alert.probe.name} "
                     f"{figure}{where})")
    return ("The same commit also caused " + "; ".join(parts)
            + ": every symptom is listed under Affected benchmarks.")


def knob_quantity(metric: metrics.Metric, stage: str | None) -> str:
    """What the knob probe's figure is (`Metric.knob_quantity`), for the target's stage."""
    return (metric.knob_quantity or metric.label).format(stage=stage or "whole")


def workaround_statement(workaround: Workaround | None, words: interface.Wording,
                         error: str | None = None, stage: str | None = None) -> str:
    if workaround is None:
        return (f"No single {words.config} knob restores the metric at the bad commit; there "
                "is no local workaround, the fix belongs in the compiler.")
    metric = metrics.by_name(workaround.metric)

    def value(x: float) -> str:
        return metric_value(x, workaround.unit, metric, error, words=words)

    text = (f"Workaround (local, not a fix): set "
            f"{words.knob_setting(workaround.knob, workaround.value)}, a decision of the "
            f"{workaround.stage} stage. On "
            f"{workaround.program.describe()} it takes the {knob_quantity(metric, stage)} "
            f"of the bad build from {value(workaround.metric_bad)} to "
            f"{value(workaround.metric_with_knob)} (good build: "
            f"{value(workaround.metric_good)}); it recovers {workaround.recovered:.0%} of the "
            "regression.")
    if workaround.decisive_application:
        text += f" The decisive application: {workaround.decisive_application}."
    return text + (" It avoids the decision for every program it is applied to; the root "
                   "cause above still needs a compiler fix, and the end-to-end workload "
                   "needs re-testing after either.")


def numerics_rows(found: Investigation) -> tuple[dict, ...]:
    """Per executable stage, in pipeline order (the stage report lists every stage as the
    probe ran them; its JSON keeps the errors keyed by name, alphabetically)."""
    numerics = found.stages.numerics or {}
    good, bad = numerics.get("good") or {}, numerics.get("bad") or {}
    pipeline = [d.stage for d in found.stages.stages]
    names = sorted(dict.fromkeys([*good, *bad]),
                   key=lambda s: pipeline.index(s) if s in pipeline else len(pipeline))
    return tuple({"stage": s, "good": (good.get(s) or {}).get("rmse_ratio"),
                  "bad": (bad.get(s) or {}).get("rmse_ratio"),
                  "good_max_abs": (good.get(s) or {}).get("max_abs"),
                  "bad_max_abs": (bad.get(s) or {}).get("max_abs")} for s in names)


def headline(found: Investigation) -> tuple[str, str, str]:
    label = metrics.by_name(found.target.metric).label
    c = found.confirmation
    if c is None:
        return (f"{label}, bad / good", "n/a", "the bad build fails")
    detail = "deterministic value" if c.pvalue is None else \
        f"{c.confidence:.0%} CI {interval(c.ci)}, {c.good_n}+{c.bad_n} samples"
    return (f"{label} of {found.target.label}, culprit / parent", f"×{c.ratio:.3f}", detail)


def notes(found: Investigation) -> dict[str, str]:
    """The captions both renderers print, each naming the program its figures are of."""
    timing, program = found.timing, benchmark_program(found).describe()
    words = wording(found)
    return {
        "figures": ("Every figure this report quotes, each once: the quantity, the program "
                    "it was measured on, the clock or counter that read it, and the "
                    "statistic. Figures on different programs, or read by different clocks, "
                    "measure different things and differ accordingly."),
        "timing": (f"{timing.iterations} synchronized iterations per build after one warm-up "
                   f"call, on {timing.program.describe()} (the program reproducer.py embeds). "
                   + ("Device time is the simulator's clock, host time the wall time of the "
                      "call" if has_device_clock(timing) else
                      "Host time is the wall time of the call (the compiler has no device "
                      "clock)")
                   + "; bad / good is the ratio of geometric means with a Welch interval on "
                   f"log times, p the {WELCH} behind that interval (so p < 0.05 exactly when "
                   "the 95% interval excludes 1). Samples in timing_samples.csv, ECDFs in "
                   "timing.png."),
        "correctness": (f"On {timing.program.describe()}. Tolerance: "
                        f"{timing.tolerance.describe(words.eager_run)}. Max rel error is "
                        f"{error_words(words, 'max_rel').definition}."),
        "numerics": (f"After each executable stage, in pipeline order, on {program} (the "
                     "stage probe; the rows above are of the timed program): RMSE ratio vs "
                     f"{words.eager} and max abs error of the stage's output against "
                     "float64."),
        "stages": (f"Per stage, on {program}: whether the canonical artifact changed, and the "
                   f"stage's {found.target.measures.stage_figure} per cold compile (median "
                   "of repeated compiles of the whole pipeline, p a two-sided Mann-Whitney "
                   "test; compile_stages.csv, compile_stages.png). Wall times move with the "
                   "machine's load: a time that moved without p < 0.05 measured the load, "
                   "not the compiler."),
        "kernels": (f"Kernels of {program}: each kernel's execution time per call, noise-free "
                    "(changed ones highlighted); the device time per call adds the launch "
                    "gaps and transfers between them. Find them by name in trace_good.json "
                    "and trace_bad.json (Chrome trace format: open in ui.perfetto.dev or "
                    "chrome://tracing)."),
    }


def timing_plot_title(found: Investigation) -> str:
    """What timing.png shows: the timed program, both builds, the ratios of these samples."""
    timing, commits = found.timing, found.commits
    device, host = timing.device, timing.host
    ratios = "; ".join(f"{c.name} ×{c.ratio:.3f}" for c in (device, host) if c.ratio)
    return (f"{timing.iterations} synchronized iterations per build of "
            f"{timing.program.describe()}, good {short(commits.good.sha)} vs bad "
            f"{short((commits.culprit or commits.bad).sha)}" + (f": {ratios}" if ratios else ""))


def stages_plot_title(found: Investigation) -> str:
    """What compile_stages.png shows: whose stages, on which program, measured how."""
    commits = found.commits
    return (f"Wall time of each stage per cold compile of {benchmark_program(found).describe()} "
            f"(median of repeated compiles), good {short(commits.good.sha)} vs bad "
            f"{short((commits.culprit or commits.bad).sha)}")


def build_report(found: Investigation, repo_name: str) -> Report:
    """The report's model. `found` must be scrubbed already."""
    timing = found.timing
    changes = {k: v for k, v in config_differences(timing.good.config, timing.bad.config).items()
               if k != "device"}
    kernels = kernel_changes(found.stages.kernels)
    rows = numerics_rows(found)
    first = found.stages.first_divergent_stage
    sha = short((found.commits.culprit or found.commits.bad).sha)
    figure = f" {confirmation_figure(found.confirmation)}" if found.confirmation else ""
    title = (f"[{repo_name}] {metrics.by_name(found.target.metric).label} regression{figure}"
             f"{f' in {first}' if first else ''}: {found.target.label} ({sha})")
    return Report(investigation=found, repo_name=repo_name, title=title, headline=headline(found),
                  causal_statement=causal_statement(found, kernels, changes, rows),
                  workaround_statement=workaround_statement(found.workaround, wording(found),
                                                            found.target.error,
                                                            found.target.stage), kernels=kernels,
                  config_changes=changes,
                  numerics_rows=rows, notes=notes(found))
