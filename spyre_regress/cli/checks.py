"""Early checks of what a user typed, before anything slow runs: one line naming the problem,
the closest valid values, and the fix (`SpyreRegressError`, exit 2)."""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from regressions import git
from regressions.errors import SpyreRegressError
from regressions.probing import suite
from regressions.probing.suite import Benchmark

SHOWN = 8  # valid values listed in a message


def did_you_mean(word: str, known: Iterable[str], n: int = 3, quote: bool = False) -> str:
    """" (did you mean x or y?)" for the closest of `known`, or ""; names `quote`d."""
    close = difflib.get_close_matches(word, list(known), n=n, cutoff=0.6)
    shown = [repr(c) if quote else c for c in close]
    return f" (did you mean {' or '.join(shown)}?)" if close else ""


def listed(values: Sequence[str]) -> str:
    shown = ", ".join(values[:SHOWN])
    return shown + (f", ... ({len(values)} in all)" if len(values) > SHOWN else "")


def repository_and_refs(repo: Path, *refs: str) -> list[str]:
    """Full shas of `refs` in the history `repo`'s suite measures (`repo` itself, or the
    checkout its asv.conf.json names), after checking that it is a git repository."""
    history = git.check_repository(suite.history_repo(repo))
    return [git.resolve(history, ref) for ref in refs]


def commit_range(repo: Path, good: str, bad: str) -> tuple[str, str]:
    """(good sha, bad sha): two commits of `repo`, `good` an ancestor of `bad` on its
    first-parent chain, which is what bisection walks."""
    good_sha, bad_sha = repository_and_refs(repo, good, bad)
    if good_sha == bad_sha:
        raise SpyreRegressError(f"--good {good} and --bad {bad} are the same commit "
                                f"{good_sha[:12]}; pass an older commit as --good")
    if good_sha not in git.first_parent_history(suite.history_repo(repo), bad_sha):
        raise SpyreRegressError(f"--good {good} ({good_sha[:12]}) is not on the first-parent "
                                f"history of --bad {bad} ({bad_sha[:12]}); pass an older "
                                "commit of that branch as --good")
    return good_sha, bad_sha


def writable_file(path: Path | None, option: str) -> None:
    """`path` can be written as a file: not a directory, and its nearest existing ancestor a
    directory we may create files in. Checked before the work, so a long run does not end
    in a refusal to write its result."""
    if path is None:
        return
    if path.is_dir():
        raise SpyreRegressError(f"{option} {path} is a directory; pass a file path")
    _creatable(path.parent, f"{option} {path}")


def writable_dir(path: Path | None, option: str) -> None:
    """`path` is a directory we may write in, or can be created as one."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise SpyreRegressError(f"{option} {path} is a file; pass a directory (it is created "
                                "if missing)")
    _creatable(path, f"{option} {path}")


def _creatable(directory: Path, what: str) -> None:
    """Create (and remove) a file in `directory` or its nearest existing ancestor: the one
    test that also holds for root and read-only mounts, where permission bits say nothing."""
    existing = Path(os.path.abspath(directory))
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise SpyreRegressError(f"cannot write {what}: {existing} is not a directory; pass "
                                "a path inside a directory")
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".spyre-regress-check-"):
            pass
    except OSError as exc:
        raise SpyreRegressError(f"cannot write {what}: {existing} refuses new files "
                                f"({exc.strerror}); pass a writable path") from None


def workload(repo: Path, name: str) -> str:
    """`name` if the repository's workload catalogue has it (when its names can be read)."""
    names = suite.workload_names(repo)
    if names and name not in names:
        close = did_you_mean(name, names, quote=True)
        raise SpyreRegressError(f"unknown workload {name!r}{close}; pass --workload with one "
                                f"of {', '.join(names)}")
    return name


def stage(repo: Path, name: str | None) -> str | None:
    """`name` if the repository's compiler under test (its catalogue's `BACKEND`) has such a
    stage; imports that backend here, once a command runs."""
    if name is None:
        return None
    from backends import interface

    backend = suite.backend_name(repo)
    stages = interface.load(backend).STAGES
    if name not in stages:
        raise SpyreRegressError(f"--stage {name!r}: {backend} has no such stage"
                                f"{did_you_mean(name, stages, quote=True)}; its stages are "
                                f"{', '.join(stages)}")
    return name


def benchmark(known: Mapping[str, Benchmark], pattern: str) -> Benchmark:
    """The one benchmark `pattern` (re.search) selects."""
    found = sorted(name for name in known if re.search(pattern, name))
    if len(found) == 1:
        return known[found[0]]
    if found:
        raise SpyreRegressError(f"--bench {pattern!r} matches {len(found)} benchmarks "
                                f"({listed(found)}); make it match exactly one")
    # compare with the full names and with their ends (Class.method, method)
    ends: dict[str, str] = {}
    for name in known:
        parts = name.split(".")
        for start in range(len(parts)):
            ends.setdefault(".".join(parts[start:]), name)
    close = difflib.get_close_matches(pattern, list(ends), n=3, cutoff=0.6)
    hint = (f"did you mean {' or '.join(repr(ends[c]) for c in dict.fromkeys(close))}?"
            if close else f"benchmarks: {listed(sorted(known))}")
    raise SpyreRegressError(f"--bench {pattern!r} matches no benchmark of the suite; {hint}; "
                            "pass a regular expression that selects exactly one")


def nearest(value: str, values: Sequence[str], n: int = 2) -> str:
    """" (did you mean 127 or 128?)" for numbers: the closest by size, not by spelling."""
    try:
        number, numbers = float(value), [float(v) for v in values]
    except ValueError:
        return ""
    close = sorted(range(len(values)), key=lambda i: abs(numbers[i] - number))[:n]
    return f" (did you mean {' or '.join(values[i] for i in sorted(close))}?)"


def printed(combination: Sequence[str]) -> str:
    """A parameter combination as detect prints it: "('mlp', 127)"."""
    return "(" + ", ".join(combination) + ("," if len(combination) == 1 else "") + ")"


def params(found: Benchmark, given: tuple[str, ...], text: str) -> tuple[str, ...]:
    """`given` (asv repr strings) if it is one of the benchmark's parameter combinations."""
    names = found.param_names
    if len(given) != len(names):
        example = printed([values[0] for values in found.params]) if found.params else "()"
        raise SpyreRegressError(f"{found.name} takes parameters ({', '.join(names)}); pass "
                                f"--params with {len(names)} value(s), e.g. \"{example}\"")
    if not found.params:
        return given
    problems = []
    for name, value, values in zip(names, given, found.params, strict=True):
        if value not in values:
            problems.append(f"{name} {value} is not one of {listed(list(values))}"
                            + (nearest(value, values) or did_you_mean(value, values, n=2)))
    if problems:
        raise SpyreRegressError(f"--params {text!r} is not a combination {found.name} runs: "
                                f"{'; '.join(problems)}; pass the params as detect prints them")
    return given
