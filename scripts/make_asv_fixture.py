"""Record tests/fixtures/asv_results with a real `asv run --record-samples` on a toy project.

Builds a tiny package in a scratch git repository (fixed author/committer dates, so commit
hashes are reproducible), one commit per injected effect, runs asv 0.6.6 over every commit
with a virtualenv environment, and copies the results directory into the test fixtures.
Writes tests/fixtures/asv_fixture.json (version 1): each commit's sha and subject, in order.

    python scripts/make_asv_fixture.py        # about 2 minutes; needs asv and virtualenv

The toy needs no torch. What each commit does (asv names `bench_<module>.<Class>.<method>`):

    1 first version
    2 add the feature          bench_execute.Feature.time_feature runs (skipped before:
                               setup raises NotImplementedError)
    3 docs only
    4 slow down 'add'          bench_execute.Work.time_work(*, 'add') about 2x slower
    5 worse rounding           bench_numerics.track_rel_error 0.001 -> 0.002 and
                               bench_execute.track_items_per_second 1000 -> 800 (declared
                               higher_is_better)
    6 break flaky              bench_execute.time_flaky raises (a failure)
    7 fix flaky
    8 docs again
bench_execute.Work.time_work(64, 'mul') is always skipped (NaN).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
MACHINE = "fixture"

TOY = '''\
"""A toy package whose commits inject known effects for the asv fixture."""

HAS_FEATURE = {has_feature}
SLOW_ADD = {slow_add}
REL_ERROR = {rel_error}
ITEMS_PER_SECOND = {items_per_second}
FLAKY_BROKEN = {flaky_broken}


def work(n, op):
    total = 0
    rounds = 2 if (op == "add" and SLOW_ADD) else 1
    for _ in range(rounds):
        for i in range(n * 200):
            total = total + i if op == "add" else total * 1 + i
    return total


def feature():
    return sum(range(5000))


def flaky():
    if FLAKY_BROKEN:
        raise RuntimeError("flaky is broken at this commit")
    return sum(range(2000))
'''

BENCH_EXECUTE = '''\
import toy


class Work:
    params = ([16, 64], ["add", "mul"])
    param_names = ("n", "op")
    rounds = 2
    repeat = (5, 5, 10.0)
    warmup_time = 0.0
    version = "work-1"

    def setup(self, n, op):
        if n == 64 and op == "mul":
            raise NotImplementedError("not measured: skipped in every commit")

    def time_work(self, n, op):
        toy.work(n, op)


class Feature:
    rounds = 2
    repeat = (5, 5, 10.0)
    warmup_time = 0.0

    def setup(self):
        if not toy.HAS_FEATURE:
            raise NotImplementedError("feature not there yet: skipped")

    def time_feature(self):
        toy.feature()


def time_flaky():
    toy.flaky()


time_flaky.rounds = 2
time_flaky.repeat = (5, 5, 10.0)
time_flaky.warmup_time = 0.0


def track_items_per_second():
    return toy.ITEMS_PER_SECOND


track_items_per_second.unit = "items/s"
track_items_per_second.higher_is_better = True  # kept in benchmarks.json by asv_runner 0.3
'''

BENCH_NUMERICS = '''\
import toy


def track_rel_error():
    return toy.REL_ERROR


track_rel_error.unit = "rel error"
'''

# (subject, toy settings); every commit rewrites toy/__init__.py from TOY.
COMMITS: list[tuple[str, dict[str, Any]]] = [
    ("toy: first version", {}),
    ("toy: add the feature", {"has_feature": True}),
    ("toy: docs only", {}),
    ("toy: slow down add", {"slow_add": True}),
    ("toy: worse rounding", {"rel_error": 0.002, "items_per_second": 800.0}),
    ("toy: break flaky", {"flaky_broken": True}),
    ("toy: fix flaky", {"flaky_broken": False}),
    ("toy: docs again", {}),
]
BASE = {"has_feature": False, "slow_add": False, "rel_error": 0.001,
        "items_per_second": 1000.0, "flaky_broken": False}

ASV_CONF = {
    "version": 1, "project": "toy", "repo": ".", "dvcs": "git", "branches": ["main"],
    "environment_type": "virtualenv", "pythons": [f"{sys.version_info.major}."
                                                   f"{sys.version_info.minor}"],
    "matrix": {"req": {"pip+asv_runner": ["0.3.2"]}},
    "build_command": ["python -m pip wheel --no-deps --no-build-isolation "
                      "-w {build_cache_dir} {build_dir}"],
    "install_command": ["in-dir={env_dir} python -m pip install --no-deps --force-reinstall "
                        "{wheel_file}"],
    "uninstall_command": ["return-code=any python -m pip uninstall -y {project}"],
    "benchmark_dir": "benchmarks", "env_dir": ".asv/env", "results_dir": ".asv/results",
    "html_dir": ".asv/html", "build_cache_size": 2, "launch_method": "spawn",
}

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "toy"
version = "0.0.1"

[tool.setuptools]
packages = ["toy"]
'''


def run(args: list[str], cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> None:
    print("+", " ".join(args), flush=True)
    code = subprocess.run(args, cwd=cwd, env=env, check=False).returncode
    if code not in ok:
        raise SystemExit(f"{args[0]} exited {code}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="asv-fixture-") as scratch:
        record(Path(scratch))


def record(scratch: Path) -> None:
    repo = scratch / "toy"
    (repo / "toy").mkdir(parents=True)
    (repo / "benchmarks").mkdir()
    # HOME is the scratch dir: `asv machine` writes ~/.asv-machine.json.
    env = {**os.environ, "HOME": str(scratch), "GIT_AUTHOR_NAME": "fixture",
           "GIT_AUTHOR_EMAIL": "fixture@example.invalid", "GIT_COMMITTER_NAME": "fixture",
           "GIT_COMMITTER_EMAIL": "fixture@example.invalid"}
    bin_dir = Path(sys.executable).parent
    run(["git", "init", "-q", "-b", "main"], repo, env)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "asv.conf.json").write_text(json.dumps(ASV_CONF, indent=2))
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "benchmarks" / "bench_execute.py").write_text(BENCH_EXECUTE)
    (repo / "benchmarks" / "bench_numerics.py").write_text(BENCH_NUMERICS)
    (repo / ".gitignore").write_text(".asv/\n")
    settings: dict[str, Any] = dict(BASE)
    shas = []
    for day, (subject, change) in enumerate(COMMITS, start=1):
        settings.update(change)
        (repo / "toy" / "__init__.py").write_text(TOY.format(**settings))
        (repo / "README").write_text(textwrap.dedent(f"toy, commit {day}: {subject}\n"))
        date = f"2026-01-{day:02d}T12:00:00+00:00"
        run(["git", "add", "-A"], repo, env)
        run(["git", "commit", "-q", "-m", subject], repo,
            {**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, env=env, check=True,
                             capture_output=True, text=True).stdout.strip()
        shas.append({"sha": sha, "subject": subject})
    asv = [str(bin_dir / "asv"), "--config", "asv.conf.json"]
    run([*asv, "machine", "--yes", "--machine", MACHINE], repo, env)
    # asv exits 2 when a benchmark failed: time_flaky does, by design, at commit 6.
    run([*asv, "run", "--record-samples", "--machine", MACHINE, "--show-stderr", "ALL"],
        repo, {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}, ok=(0, 2))
    target = FIXTURES / "asv_results"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(repo / ".asv" / "results", target)
    (FIXTURES / "asv_fixture.json").write_text(
        json.dumps({"version": 1, "machine": MACHINE, "commits": shas}, indent=2) + "\n")
    print(f"wrote {target} and {FIXTURES / 'asv_fixture.json'}")


if __name__ == "__main__":
    main()
