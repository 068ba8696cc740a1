"""The report's figures as PNG bytes (matplotlib, Agg backend: no display, no network).

ECDFs rather than histograms for the timing: with 100 samples per build an ECDF shows the
whole distribution without a bin-width choice, a shift reads as horizontal distance, and the
medians are where the curves cross 0.5. Each function returns bytes, so writing files stays in
`reports.bundle`; PNG metadata is emptied so the same data gives the same bytes.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

from regressions.bisection.stages import StageDelta  # noqa: E402
from regressions.investigation.model import BuildRun  # noqa: E402

GOOD_COLOR = "#1f77b4"
BAD_COLOR = "#d62728"
_METADATA = {"Software": None}


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, metadata=_METADATA)
    plt.close(figure)
    return buffer.getvalue()


def _ecdf(axes, samples: Sequence[float], label: str, color: str, scale: float,
          width: float) -> None:
    values = np.sort(np.asarray(samples, dtype=float)) * scale
    levels = np.arange(1, values.size + 1) / values.size
    axes.step(values, levels, where="post", color=color, label=label, linewidth=width)
    median = float(np.median(values))
    axes.axvline(median, color=color, linestyle="--", linewidth=0.9)


def timing_figure(good: BuildRun | None, bad: BuildRun | None, title: str) -> bytes:
    """ECDFs of device time and host wall time per call, good vs bad."""
    figure, panels = plt.subplots(1, 2, figsize=(10, 3.6), constrained_layout=True)
    series = (("device_us", "simulated device time per call (us)", 1.0),
              ("host_s", "host wall time per call (ms)", 1e3))
    for axes, (key, label, scale) in zip(panels, series, strict=True):
        # good drawn wider underneath, so identical distributions still show both colours
        drawn = [(name, getattr(timing, key), color, width) for name, timing, color, width in
                 (("good", good, GOOD_COLOR, 3.2), ("bad", bad, BAD_COLOR, 1.4))
                 if timing and len(getattr(timing, key))]
        for name, values, color, width in drawn:
            _ecdf(axes, values, f"{name} (n={len(values)})", color, scale=scale, width=width)
        if not drawn:  # e.g. host time of a compiler whose programs need a card to run
            axes.text(0.5, 0.5, "not measured here", ha="center", va="center",
                      transform=axes.transAxes, color="0.4")
        axes.set_xlabel(label)
        axes.set_ylabel("fraction of iterations")
        axes.set_ylim(0, 1.02)
        axes.grid(alpha=0.3)
        if drawn:
            axes.legend(loc="lower right", fontsize=8)
    figure.suptitle(_wrapped(title), fontsize=9)
    return _png(figure)


def _wrapped(title: str, width: int = 110) -> str:
    """A title on as many lines as it needs: never cut at the figure's edge."""
    return "\n".join(textwrap.wrap(title, width))


def compile_figure(rows: Sequence[StageDelta], first_stage: str | None, title: str) -> bytes:
    """Per-stage cold compile time, good vs bad; the first divergent stage is marked."""
    stages = [r.stage for r in rows]
    good = [r.compile_s_good * 1e3 for r in rows]
    bad = [r.compile_s_bad * 1e3 for r in rows]
    positions = np.arange(len(stages))
    figure, axes = plt.subplots(figsize=(10, 0.45 * len(stages) + 1.2), constrained_layout=True)
    for offset, values, color, name in ((-0.2, good, GOOD_COLOR, "good"),
                                        (0.2, bad, BAD_COLOR, "bad")):
        bars = axes.barh(positions + offset, values, height=0.4, color=color, label=name)
        axes.bar_label(bars, labels=[f"{v:.1f}" for v in values], padding=3, fontsize=7)
    axes.set_yticks(positions, [s + (" (first divergent)" if s == first_stage else "")
                                for s in stages])
    for tick, stage in zip(axes.get_yticklabels(), stages, strict=True):
        if stage == first_stage:
            tick.set_fontweight("bold")
    axes.invert_yaxis()
    axes.set_xlabel("cold compile time (ms, median of repeats)")
    axes.set_xlim(0, max([*good, *bad, 1e-3]) * 1.12)  # room for the labels
    axes.grid(axis="x", alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    figure.suptitle(_wrapped(title), fontsize=9)
    return _png(figure)


def numerics_figure(rows: Sequence[Mapping], tolerance: float, stage: str | None,
                    eager: str) -> bytes:
    """RMSE ratio vs the backend's eager run (`eager`, e.g. "eager DLFloat16") after each
    executable stage, with the pass line."""
    names = [r["stage"] for r in rows]
    positions = np.arange(len(names))
    figure, axes = plt.subplots(figsize=(10, 3.2), constrained_layout=True)
    for key, color, offset in (("good", GOOD_COLOR, -0.2), ("bad", BAD_COLOR, 0.2)):
        values = [r[key] if r[key] is not None else np.nan for r in rows]
        axes.bar(positions + offset, values, width=0.4, color=color, label=key)
    axes.axhline(tolerance, color="black", linestyle="--", linewidth=1,
                 label=f"tolerance ({tolerance:g})")
    axes.set_xticks(positions, [n + ("\n(first drift)" if n == stage else "") for n in names])
    axes.set_ylabel(f"RMSE vs float64 / {eager}'s")
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    return _png(figure)
