"""The nightly's investigations and reports: from tonight's new alerts to one bundle per culprit.

Each new alert is investigated (`Investigator.investigate`); what its own measurement says
becomes the lifecycle's `Evidence` (`regressions.investigation.evidence`), which decides `reported`
or `not-reproduced` (`lifecycle.investigated`). Alerts whose bisection names the same
culprit become one report listing every symptom: the bundle renders the first alert's
investigation with the others attached as related findings. Investigations are kept
(scrubbed) under STATE/investigations, so a later night that adds a symptom to a culprit
rewrites its bundle without measuring the first alert again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from regressions.detection.alerts import Alert
from regressions.errors import SpyreRegressError
from regressions.investigation import evidence, model
from regressions.investigation.investigator import (
    CONFIRM_SAMPLES,
    Investigator,
    Located,
    alert_target,
)
from regressions.investigation.model import Investigation
from regressions.probing import suite
from regressions.records import files, lifecycle
from regressions.records.results_store import ResultsStore
from reports import scrub_investigation, write_bundle
from reports.bundle import MARKER
from spyre_regress.prober import GitHistory, ProbeRunner, SubprocessProber

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Published:
    """One culprit's report: the alerts it answers, its investigation and its bundle."""

    culprit: str
    alert_ids: tuple[int, ...]
    investigation: Investigation
    bundle: Path

    @property
    def stage(self) -> str | None:
        return self.investigation.stages.first_divergent_stage

    @property
    def report(self) -> str:
        return str(self.bundle)


@dataclass(frozen=True, kw_only=True)
class Reporting:
    """Where the nightly investigates and reports: the repository under test and its asv
    results, the nightly's state (probe work, kept investigations, the bisection
    measurements under `machine`) and the reports' directory; the benchmark environment
    every probe gets; detection's floors, which the confirmation at a culprit uses too."""

    repo: Path
    results_dir: Path
    state_dir: Path
    reports_dir: Path
    machine: str
    env: Mapping[str, str] = field(default_factory=dict)
    floors: tuple[tuple[str, float], ...] = ()
    samples: int = CONFIRM_SAMPLES  # per side at the culprit, and timed iterations per build


class Reporter:
    """Investigates the nightly's alerts in one repository and writes their bundles."""

    def __init__(self, where: Reporting, progress: Progress,
                 runner: ProbeRunner | None = None, probes: int = 1) -> None:
        """`runner` runs each probe (here by default, else on an executor); `probes`: how
        many may measure at once."""
        self.repo, self.results_dir = where.repo, where.results_dir
        self.state_dir, self.reports_dir = where.state_dir, where.reports_dir
        self.floors, self.progress = where.floors, progress
        self.saved = where.state_dir / "investigations"
        prober = SubprocessProber(where.repo, where.state_dir / "work",
                                  where.state_dir / "probe-results", where.machine,
                                  progress=progress,
                                  env=dict(where.env), runner=runner)
        self.history = GitHistory(where.repo)
        self.investigator = Investigator(self.history, prober, progress, probes,
                                         samples=where.samples)
        self.located: dict[int, tuple[Alert, model.Target, Located]] = {}  # tonight's

    def investigate(self, alert_id: int, alert: Alert) -> lifecycle.Outcome:
        """One alert's investigation, as the lifecycle's outcome; a reproduced one is kept."""

        def attempt() -> Located:
            target = alert_target(alert, ResultsStore(self.results_dir).param_names(),
                                  suite.numerics_widths(self.repo),
                                  suite.stage_width(self.repo))
            found = self.investigator.investigate(alert, target, self._work(alert_id),
                                                  self.floors)
            files.write_json(self.saved / f"alert-{alert_id:03d}.json",
                             scrub_investigation(found))
            assert found.bisect is not None and found.commits.culprit is not None  # located
            located = Located(found.bisect, found.commits.good.sha, found.commits.culprit.sha,
                              found.confirmation)
            self.located[alert_id] = (alert, target, located)
            return located

        return evidence.outcome_of(alert, attempt, self.history.parent, self.floors)

    def at_head(self, alert_id: int, head: str) -> lifecycle.HeadCheck | None:
        """The probe of an alert investigated tonight, built and measured once more at the
        head (the investigation has the good and bad builds' samples already)."""
        if alert_id not in self.located:
            return None
        alert, target, located = self.located[alert_id]
        self.progress(f"alert {alert_id}: measuring the probe at the head {head[:12]}")
        return evidence.at_head(alert, located, lambda commit, n: self.investigator.prober.bench(
            commit, target, n), head, floors=self.floors)

    def publish(self, group: lifecycle.CulpritReport) -> Published:
        """The culprit's bundle: its first investigated alert, the others as related."""
        found = [self._saved(i) for i in group.alert_ids]
        present = [(i, f) for i, f in zip(group.alert_ids, found, strict=True) if f]
        if not present:
            raise SpyreRegressError(f"no saved investigation for the alerts {group.alert_ids} "
                                    f"of culprit {group.culprit[:12]}")
        first = present[0][1]
        related = tuple(model.Related(f.alert, f.confirmation, f.stages.first_divergent_stage)
                        for _, f in present[1:])
        combined = replace(first, related=related)
        out = self.reports_dir / f"culprit-{group.culprit[:12]}"
        bundle = write_bundle(combined, out)
        # beside the bundle, naming the traces the bundle holds: the reports directory alone
        # (what the workflow uploads) is enough to render it again
        shipped = {side: str(bundle / f"trace_{side}.json")
                   if (bundle / f"trace_{side}.json").is_file() else None
                   for side in combined.traces}
        files.write_json(out / "investigation.json",
                         scrub_investigation(replace(combined, traces=shipped)))
        self.progress(f"culprit {group.culprit[:12]}: report for alert(s) "
                      f"{', '.join(map(str, group.alert_ids))} written to {bundle}")
        return Published(group.culprit, tuple(i for i, _ in present), combined, bundle)

    def written(self, report: str) -> bool:
        """A bundle is whole when its folder holds the summary (written last into the staging
        folder that is renamed into place) and its archive exists beside it."""
        folder = Path(report)
        return (folder / MARKER).is_file() and folder.with_name(f"{folder.name}.tar.gz").is_file()

    def _saved(self, alert_id: int) -> Investigation | None:
        path = self.saved / f"alert-{alert_id:03d}.json"
        if not path.is_file():
            return None
        return model.load(files.read_json(path, "saved investigation"), str(path))

    def _work(self, alert_id: int) -> Path:
        return self.state_dir / "work" / f"alert-{alert_id:03d}"
