"""Scratch histories with known regressions, built from the project's own sources.

The demo and the end-to-end tests both need a real git repository whose commits carry chosen
changes (asv's test suite builds `generate_test_repo` for the same reason). The first commit
imports a project as installed - spyre-regress itself, or the example Inductor-based backend
(`inductor_history`) - and every later commit applies one benign edit or one injected
regression from that project's table (`Project`), with fixed dates so commit order and dates
agree.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from regressions import git
from regressions.errors import SpyreRegressError
from regressions.groundtruth import scenarios

SOURCES = ("pyproject.toml", "README.md", "asv.conf.json", "spyre_sim", "regressions",
           "reports", "spyre_regress", "benchmarks")
START_TIME = 1_767_225_600  # 2026-01-01T00:00:00Z; commits are an hour apart


@dataclass(frozen=True)
class Project:
    """What a scratch history imports first and what its later commits may apply."""

    name: str  # the first commit's subject says "import <name>"
    sources: tuple[str, ...]  # files and folders copied from the source tree
    folder: str  # where they are inside the installed source tree ("" for its root)
    injections: Mapping[str, scenarios.Injection]
    benign: tuple[tuple[str, scenarios.Edit], ...]


SPYRE_REGRESS = Project("spyre-regress", SOURCES, "", scenarios.INJECTIONS, benign=scenarios.BENIGN)


@dataclass(frozen=True)
class CommitRecord:
    sha: str
    subject: str
    injection: str | None  # the scenario name, for injected regressions


def project_root() -> Path:
    """The source tree spyre-regress was installed from, as its installation records it
    (PEP 610 `direct_url.json`, written by `pip install -e .` and `pip install <dir>`)."""
    install = ("install spyre-regress from a source checkout with `pip install -e .`")
    # every record of the name: a build's egg-info in the source tree has no direct_url.json
    recorded = next((text for dist in importlib.metadata.distributions(name="spyre-regress")
                     if (text := dist.read_text("direct_url.json"))), None)
    url = urllib.parse.urlparse((json.loads(recorded) if recorded else {}).get("url", ""))
    if url.scheme != "file":
        raise SpyreRegressError(f"the demo builds its history from the project's sources, "
                                f"and this installation does not record where they are; "
                                f"{install}")
    root = Path(urllib.parse.unquote(url.path))
    missing = [name for name in SOURCES if not (root / name).exists()]
    if missing:
        raise SpyreRegressError(
            f"the project sources are incomplete at {root} (missing {missing}); {install}")
    return root


def copy_sources(source: Path, dest: Path, sources: tuple[str, ...] = SOURCES) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".asv", "*.egg-info")
    for name in sources:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, dest / name, ignore=ignore)
        else:
            shutil.copy2(path, dest / name)


def build(dest: Path, plan: list[str | None], source: Path | None = None,
          project: Project = SPYRE_REGRESS) -> list[CommitRecord]:
    """Create `dest` with one commit per entry of `plan`: a scenario name, `REVERT` + a
    scenario name (the revert of that injection), or None for the next benign change. The
    first commit imports the project's sources (from `source`, else the installed tree)."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise SpyreRegressError(f"{dest} exists and is not empty; choose a new directory")
    git.init_repository(dest)
    copy_sources((source or project_root()) / project.folder, dest, project.sources)
    (dest / ".gitignore").write_text("/.asv/\n__pycache__/\n")
    first = f"import {project.name}"
    records = [CommitRecord(git.commit_all(dest, first, START_TIME), first, None)]
    return records + commit_plan(dest, plan, project, START_TIME)


def commit_plan(dest: Path, plan: list[str | None], project: Project, start: int
                ) -> list[CommitRecord]:
    """One commit on `dest`'s branch per entry of `plan` (see `build`), an hour apart after
    `start`."""
    records = []
    benign = iter(project.benign)
    notes = 0
    for index, step in enumerate(plan, start=1):
        timestamp = start + 3600 * index
        if step is None:
            entry = next(benign, None)
            if entry is None:
                notes += 1
                subject = f"docs: add release note {notes}"
                note = dest / "docs" / "notes" / f"{notes:02d}.md"
                note.parent.mkdir(parents=True, exist_ok=True)
                note.write_text(f"# Release note {notes}\n\nNothing user-visible changed.\n")
            else:
                subject, edit = entry
                scenarios.apply_edit(dest, edit)
            records.append(CommitRecord(git.commit_all(dest, subject, timestamp), subject, None))
        elif step.startswith(scenarios.REVERT):
            injection = project.injections[step.removeprefix(scenarios.REVERT)]
            scenarios.revert(dest, injection)
            subject = f'Revert "{injection.subject}"'
            records.append(CommitRecord(git.commit_all(dest, subject, timestamp), subject, step))
        else:
            injection = project.injections[step]
            scenarios.apply(dest, injection)
            records.append(CommitRecord(git.commit_all(dest, injection.subject, timestamp),
                                        injection.subject, step))
    return records
