"""Where the repository under test keeps its benchmark suite and workload catalogue.

The one resolver for them: a repository measured by this tool has `benchmarks/` (the asv
suite) with `benchmarks/workloads.py` (`build(name, seq, width=None)`). asv measures historical
commits with the *current* suite, and so do the probes: they get a copy of today's suite, taken
once per investigation, and load it by path inside the commit under test. Nothing here imports
the repository's code into this process: that runs in a probe (`discover`), or is read as
text (`numerics_widths`). The measurement code the probes share with the reproducers
(`harness.py`) is found through this package, wherever it is installed.
"""

from __future__ import annotations

import ast
import importlib.resources
import shutil
from pathlib import Path

from regressions import runner, store
from regressions.errors import SpyreRegressError

SUITE_DIR = "benchmarks"
CATALOGUE = "workloads.py"


def harness_path() -> Path:
    """The installed `regressions/harness.py` (probes load it by path)."""
    return Path(str(importlib.resources.files("regressions").joinpath("harness.py")))


def catalogue_path(repo: Path) -> Path:
    """`<repo>/benchmarks/workloads.py`, or an error saying what the repository lacks."""
    path = Path(repo) / SUITE_DIR / CATALOGUE
    if not path.is_file():
        raise SpyreRegressError(f"{path.parent} has no {CATALOGUE}: point --repo at a checkout "
                                "with the benchmark suite and its workload catalogue")
    return path


def copy_suite(repo: Path, work_dir: Path) -> Path:
    """Today's suite copied to `<work_dir>/suite/benchmarks`; the copy's path."""
    source = catalogue_path(repo).parent
    target = Path(work_dir) / "suite" / SUITE_DIR
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def numerics_widths(repo: Path) -> dict[str, int]:
    """`NUMERICS_WIDTHS` of the repository's catalogue, read as text (never imported)."""
    tree = ast.parse(catalogue_path(repo).read_text())
    for node in ast.walk(tree):
        target = getattr(node, "target", None) or (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "NUMERICS_WIDTHS":
            return ast.literal_eval(node.value)
    return {}


def param_names(results_dir: Path) -> dict[str, tuple[str, ...]]:
    """Each benchmark's parameter names, from the `benchmarks.json` asv writes."""
    meta = store.read_json(Path(results_dir) / "benchmarks.json", "asv benchmark list")
    if not isinstance(meta, dict):
        raise SpyreRegressError(f"{results_dir}/benchmarks.json is not asv's benchmark list; "
                                "pass the results directory asv wrote")
    return {name: tuple(entry.get("param_names") or ()) for name, entry in meta.items()
            if isinstance(entry, dict)}


def discover(repo: Path, work_dir: Path) -> dict[str, tuple[str, ...]]:
    """Every benchmark of the repository's suite and its parameter names.

    asv_runner imports the suite to list it, so this runs in a probe, with the repository's
    own code on the path, never in this process.
    """
    suite = copy_suite(repo, work_dir)
    answer = runner.run_probe(Path(repo), "discover", {"suite": str(suite)})
    if answer.get("status") != "ok":
        raise SpyreRegressError(f"cannot list the benchmarks of {repo}: "
                                f"{answer.get('detail', answer.get('status'))}; check that "
                                "`asv check` passes there")
    return {name: tuple(names) for name, names in answer["benchmarks"].items()}
