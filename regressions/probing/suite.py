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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regressions import codec, processes
from regressions.errors import SpyreRegressError
from regressions.probing import answers
from regressions.probing.protocol import DiscoverAnswer, Failed, ProbeRequest

SUITE_DIR = "benchmarks"
CATALOGUE = "workloads.py"
CONFIG = "asv.conf.json"


def history_repo(repo: Path) -> Path:
    """The git repository whose history the suite at `repo` measures: its asv.conf.json's
    `repo`, relative to the configuration (asv's own reading). A suite that lives in its
    project says "."; a suite that measures an external checkout (as django-asv measures
    django) names the checkout's path.

    Raises:
        SpyreRegressError: `repo` names a URL (asv would clone it; this tool needs a clone
            it can read) or a directory that does not exist.
    """
    config = Path(repo) / CONFIG
    if not config.is_file():
        return Path(repo)
    from asv.util import load_json  # asv's reader, which allows the file's comments

    value = str(load_json(str(config), js_comments=True).get("repo", "."))
    if "://" in value or value.startswith("git@"):
        raise SpyreRegressError(f"{config} measures {value}, a URL; clone it and set `repo` "
                                "there to the clone's path")
    history = (Path(repo) / value).resolve()
    if not history.is_dir():
        raise SpyreRegressError(f"{config} measures {history}, which does not exist; set "
                                "`repo` there to a git checkout of the project")
    return history


def harness_path() -> Path:
    """The installed `regressions/probing/harness.py` (probes load it by path)."""
    return Path(str(importlib.resources.files("regressions.probing").joinpath("harness.py")))


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
    value = _assigned(ast.parse(catalogue_path(repo).read_text()), "NUMERICS_WIDTHS")
    return {} if value is None else ast.literal_eval(value)


def backend_name(repo: Path) -> str:
    """`BACKEND` of the repository's catalogue, read as text: the compiler under test's
    backend module (`backends.interface.MODULES`); `spyre_sim` when the catalogue names none.

    Raises:
        SpyreRegressError: the catalogue names a backend this tool does not ship.
    """
    from backends import interface

    name = _literal(ast.parse(catalogue_path(repo).read_text()), "BACKEND") or "spyre_sim"
    if name not in interface.MODULES:
        raise SpyreRegressError(f"{catalogue_path(repo)} names BACKEND = {name!r}; this "
                                f"spyre-regress measures {', '.join(sorted(interface.MODULES))}")
    return name


def compiler_name(repo: Path) -> str | None:
    """`COMPILER` of the repository's catalogue, read as text: the module of the repository
    that takes the backend's own compiler's place (an Inductor-based project's
    `compile_graph` and `CONFIG`, see backends/inductor.py); None when it names none."""
    name = _literal(ast.parse(catalogue_path(repo).read_text()), "COMPILER")
    if name is not None and not (isinstance(name, str) and all(
            part.isidentifier() for part in name.split("."))):
        raise SpyreRegressError(f"{catalogue_path(repo)} names COMPILER = {name!r}; it must "
                                "be a dotted module name, e.g. 'my_backend.compiler'")
    return name


def stage_width(repo: Path) -> int | None:
    """`STAGE_WIDTH` of the suite's compile benchmarks (the width the per-stage compile
    benchmark builds its workloads at), read as text; None when the suite has none."""
    path = Path(repo) / SUITE_DIR / "bench_compile.py"
    if not path.is_file():
        return None
    value = _literal(ast.parse(path.read_text()), "STAGE_WIDTH")
    return value if isinstance(value, int) else None


def _assigned(tree: ast.AST, name: str) -> ast.expr | None:
    """The expression first assigned to `name` (`name = ...` or `name: T = ...`), or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            target: ast.expr | None = node.targets[0]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:
            return node.value
    return None


def _literal(tree: ast.AST, name: str) -> Any:
    """The literal value assigned to module-level `name`, or None."""
    value = _assigned(tree, name)
    try:
        return None if value is None else ast.literal_eval(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of a suite: its parameter names and each parameter's values (asv's repr
    strings, e.g. "'mlp'", "127")."""

    name: str
    param_names: tuple[str, ...]
    params: tuple[tuple[str, ...], ...]


def discover(repo: Path, work_dir: Path) -> dict[str, Benchmark]:
    """Every benchmark of the repository's suite, with its parameters.

    asv_runner imports the suite to list it, so this runs in a probe, with the repository's
    own code on the path, never in this process.
    """
    suite = copy_suite(repo, work_dir)
    answer = answers.read(DiscoverAnswer, processes.run_probe(
        Path(repo), "discover", codec.to_json(ProbeRequest(suite=str(suite)))), "discover")
    if isinstance(answer, Failed):
        raise SpyreRegressError(f"cannot list the benchmarks of {repo}: "
                                f"{answer.detail or answer.status}; check that "
                                "`asv check` passes there")
    return {name: Benchmark(name, names, tuple(answer.params.get(name, ())))
            for name, names in answer.benchmarks.items()}


def workload_names(repo: Path) -> tuple[str, ...]:
    """The names in the catalogue's `WORKLOADS`, read as text (never imported): the string
    keys of a dict literal, or the first argument of each `Workload(...)` call in it. Empty
    when the catalogue builds its table some other way (then nothing can be checked early)."""
    value = _assigned(ast.parse(catalogue_path(repo).read_text()), "WORKLOADS")
    if value is not None:
        names = [k.value for k in getattr(value, "keys", []) or []
                 if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        names += [call.args[0].value for call in ast.walk(value)
                  if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "Workload"
                  and call.args and isinstance(call.args[0], ast.Constant)
                  and isinstance(call.args[0].value, str)]
        return tuple(dict.fromkeys(names))
    return ()
