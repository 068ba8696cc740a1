"""The suites this tool ships for external checkouts (`suites/`), written out for one.

A shipped suite is a folder with `asv.conf.json` (a template naming the checkout as
`@CHECKOUT@` and its branch as `@BRANCH@`), `benchmarks/` (the measurements and the workload
catalogue, whose `BACKEND` names the backend module they measure through) and `suite.json`
(version 1: the tool's own measuring files the benchmarks import, the tool's packages they
import - copied beside `benchmarks/`, where asv's path finds them - and the script that
installs the checkout into asv's environments). Writing it out copies all of that, with the backend
module and its companions, into a directory of the user's; asv and every other command then
run there, against the checkout's history.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import suites
from backends import interface
from regressions import git
from regressions.errors import SpyreRegressError
from regressions.probing import suite

MANIFEST = "suite.json"
MANIFEST_VERSION = 1
TOOL_ROOT = Path(interface.__file__).resolve().parents[1]  # where the tool's packages are


def shipped() -> dict[str, Path]:
    """Each shipped suite's folder, by name."""
    root = Path(suites.__file__).resolve().parent
    return {p.name: p for p in sorted(root.iterdir()) if (p / MANIFEST).is_file()}


def manifest(folder: Path) -> dict:
    found = json.loads((folder / MANIFEST).read_text())
    if found.get("version") != MANIFEST_VERSION:
        raise SpyreRegressError(f"{folder / MANIFEST} has version {found.get('version')!r}; "
                                f"this tool reads version {MANIFEST_VERSION}")
    return found


def write(name: str, checkout: Path, out: Path, branch: str) -> Path:
    """Suite `name` written into `out` for the git checkout `checkout` (its `branch`): the
    benchmarks (replacing any written before; asv's results and environments under `out`
    stay), the backend module and its companions beside them, the tool's measuring files,
    the tool's packages they import (beside `benchmarks/`), the installer and
    asv.conf.json. Returns `out`.

    Raises:
        SpyreRegressError: an unknown suite name, a checkout that is not a git repository
            or lacks `branch`, or an `out` that is a file.
    """
    known = shipped()
    if name not in known:
        raise SpyreRegressError(f"no suite named {name!r}; shipped: {', '.join(known)}")
    checkout = git.check_repository(checkout).resolve()
    git.resolve(checkout, branch)  # a clear error for a branch the checkout lacks
    if out.exists() and not out.is_dir():
        raise SpyreRegressError(f"--out {out} is a file; pass a directory")
    source, listed = known[name], manifest(known[name])
    benchmarks = out / suite.SUITE_DIR
    if benchmarks.exists():
        shutil.rmtree(benchmarks)
    shutil.copytree(source / suite.SUITE_DIR, benchmarks,
                    ignore=shutil.ignore_patterns("__pycache__"))
    backend = suite.backend_name(out)
    for path in [interface.module_path(backend), *interface.companion_paths(backend).values(),
                 *(TOOL_ROOT / f for f in listed["tool_files"])]:
        shutil.copy2(path, benchmarks / path.name)
    for package in listed.get("tool_packages", []):  # beside benchmarks/: on asv's path
        shutil.rmtree(out / package, ignore_errors=True)
        shutil.copytree(TOOL_ROOT / package, out / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(TOOL_ROOT / listed["installer"], out / Path(listed["installer"]).name)
    template = (source / suite.CONFIG).read_text()
    (out / suite.CONFIG).write_text(template.replace('"@CHECKOUT@"', json.dumps(str(checkout)))
                                    .replace('"@BRANCH@"', json.dumps(branch)))
    return out
