"""Views the report derives from an investigation: kernel changes and Config differences.

Pure functions over the typed investigation; every statistic was computed by the
investigation itself (`regressions.investigation`), so nothing here tests or estimates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from regressions.bisection.stages import KernelDelta


@dataclass(frozen=True, kw_only=True)
class KernelChanges:
    removed: tuple[str, ...]  # only at the good commit
    added: tuple[str, ...]  # only at the bad commit
    changed: tuple[tuple[str, float, float], ...]  # (name, good_us, bad_us), |delta| > 0.5%
    good_total_us: float
    bad_total_us: float
    unmodelled: tuple[str, ...] = ()  # kernels the backend's model could not time

    @property
    def any(self) -> bool:
        return bool(self.removed or self.added or self.changed)


def kernel_changes(kernels: Sequence[KernelDelta], relative: float = 0.005) -> KernelChanges:
    """Kernels that appear, disappear, or change time by more than `relative` (0.5%); those
    the model could not time apart (in no total)."""
    unmodelled = tuple(k.name for k in kernels if k.unmodelled)
    kernels = [k for k in kernels if not k.unmodelled]
    removed = tuple(k.name for k in kernels if k.bad_us is None)
    added = tuple(k.name for k in kernels if k.good_us is None)
    changed = tuple(
        (k.name, k.good_us, k.bad_us) for k in kernels
        if k.good_us is not None and k.bad_us is not None
        and abs(k.bad_us - k.good_us) > relative * max(abs(k.good_us), 1e-12))
    return KernelChanges(removed=removed, added=added, changed=changed,
                         good_total_us=sum(k.good_us or 0.0 for k in kernels),
                         bad_total_us=sum(k.bad_us or 0.0 for k in kernels),
                         unmodelled=unmodelled)


def config_differences(good: Mapping[str, Any], bad: Mapping[str, Any]) -> dict[str, list]:
    """Config fields whose values differ between the builds: {field: [good, bad]}."""
    if not good or not bad:
        return {}
    return {name: [good.get(name), bad.get(name)] for name in sorted(set(good) | set(bad))
            if good.get(name) != bad.get(name)}
