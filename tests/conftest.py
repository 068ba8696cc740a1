import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doc_commands import expand, fenced_commands

import spyre_sim
from backends import interface
from benchmarks import workloads
from regressions.groundtruth import scratch

# The console script pip installed beside this interpreter: what a user runs.
SCRIPT = Path(sys.executable).with_name("spyre-regress")
# The slowest test files, slowest first (seconds of their slowest fixture or test on this
# 2-core machine, one run of the whole suite on two workers, the session's demo included):
# scheduled before the rest, so the two xdist workers (`--dist loadfile
# --no-loadscope-reorder` hands out files in collection order) finish together instead of one
# waiting on the other.
SLOWEST_FIRST = (
    "e2e/test_torch_spyre_nightly.py",   # 1467 alone (2007 before the knob probe screened)
    "e2e/test_inductor_nightly.py",      # 485 alone, 944 beside the torch-spyre night
    "e2e/test_documented_commands.py",   # 223 (the workflow step) + 122 (a report)
    "e2e/test_injected_regressions.py",  # 313 in all (370 before one workdiv history)
    "e2e/test_demo.py",                  # 268 (477 before the demo took 4 commits)
    "test_compile_work.py",              # 212
    "e2e/test_nightly_edge.py",          # 174 (the cluster night alone)
    "e2e/test_bundles.py",               # 170 in all
    "e2e/test_reverted_excursion.py",    # 100
    "e2e/test_interrupted_nightly.py",   # 70 in all
    "e2e/test_asv_continuous.py",        # 38
    "test_inductor_capture.py",          # 34
    "e2e/test_torch_spyre.py",           # 62
)


def pytest_collection_modifyitems(items):
    """The slowest files first (`SLOWEST_FIRST`), then the rest in their usual order."""
    tests = Path(__file__).parent

    def place(item) -> int:
        name = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) \
            else ""
        return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)

    items.sort(key=place)  # stable: within a file, and among the rest, the order stays


def load_companion(name: str):
    """A torch-spyre companion of backends/ (`backends/NAME.py`) loaded by path under its bare
    name, as a suite's environment loads the files written beside the backend."""
    return interface.load_file(name, Path(interface.__file__).with_name(f"{name}.py"))


def compile_workload(name, seq, width, **config):
    program, inputs = workloads.build(name, seq, width)
    compiled = spyre_sim.compile(program, inputs, spyre_sim.Config(**config))
    return compiled, program, inputs


def user_environment(**extra: str) -> dict[str, str]:
    """The environment a user's shell gives the installed script: no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_CURRENT_TEST")}
    env.update(extra)
    return env


def run_cli(*args: str, cwd: Path, timeout: float = 1800, **env: str
            ) -> subprocess.CompletedProcess:
    """`spyre-regress ARGS` as a user runs it: the installed script, from `cwd` (outside the
    repository), with PYTHONPATH unset."""
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, env=user_environment(**env),
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def outside(tmp_path_factory) -> Path:
    """A working directory outside the repository."""
    return tmp_path_factory.mktemp("user")


def isolated_home(home: Path) -> dict[str, str]:
    """Environment for a user whose HOME is `home` (asv writes its machine file there), still
    reading this machine's pip configuration (a package index configured per user)."""
    env = {"HOME": str(home)}
    config = Path.home() / ".config" / "pip" / "pip.conf"
    if "PIP_CONFIG_FILE" not in os.environ and config.is_file():
        env["PIP_CONFIG_FILE"] = str(config)
    return env


def documented(subcommand: str, page: str | None = None):
    """The fenced commands of the docs that run `subcommand` (tests/doc_commands.py)."""
    return [c for c in fenced_commands()
            if c.subcommand == subcommand and (page is None or c.page == page)]


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """The README's `spyre-regress demo`, as written, from a directory outside the
    repository: (its output directory, the finished process). Shared by the demo's tests
    (tests/e2e/test_demo.py; the documented-commands test checks its command is this one)."""
    (command,) = documented("demo", "README.md")
    user = tmp_path_factory.mktemp("user")
    done = run_cli(*expand(command, {}), cwd=user, timeout=2400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return user / "spyre-regress-demo", done



@pytest.fixture(scope="session")
def asv_env(tmp_path_factory) -> Path:
    """An asv environment as the scratch histories' asv.conf.json makes it (virtualenv,
    pinned torch, asv_runner) with the project's dependencies installed and the project not,
    built once for the whole run (both xdist workers: the first builds, the other waits).

    Seeded into a scratch repository (`seed_asv_env`), it spares an end-to-end test the ~45 s
    of creating the environment and resolving the dependencies on its first install; asv
    still builds and installs every commit it benchmarks. The demo's test creates its own as
    a user's first run does."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    done = root / "asv-env-template" / "ready"
    with open(root / "asv-env-template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            repo = root / "asv-env-template" / "repo"
            shutil.rmtree(repo, ignore_errors=True)
            scratch.build(repo, [])
            path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
            # asv 0.6.6's `setup` exits 1 after creating the environments (its command
            # returns the list of them), so success is the environment's own record
            setup = subprocess.run([sys.executable, "-m", "asv", "setup"], cwd=repo,
                                   capture_output=True, text=True,
                                   env={**os.environ, "PATH": path})
            made = list((repo / ".asv" / "env").glob("*/asv-env-info.json"))
            assert len(made) == 1, setup.stdout[-2000:] + setup.stderr[-2000:]
            env = made[0].parent
            python = str(env / "bin" / "python")
            subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-build-isolation",
                            str(repo)], check=True, capture_output=True)
            subprocess.run([python, "-m", "pip", "uninstall", "--yes", "--quiet",
                            "spyre-regress"], check=True, capture_output=True)
            done.write_text(str(env))
    return Path(done.read_text())


def seed_asv_env(env_dir: Path, template: Path) -> None:
    """Copy the session's asv environment into `env_dir` (a repository's `.asv/env`, or a
    scale-out worker's), under the name asv gives it, unless one is there. Files are hard
    links where the file system allows (the environment is 1.4 GB, mostly torch): pip
    replaces a file it changes rather than writing into it, so the template stays intact."""
    target = Path(env_dir) / template.name
    if not target.exists():
        shutil.copytree(template, target, symlinks=True, copy_function=_link_or_copy)


def _link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:  # another file system, or one without hard links
        shutil.copy2(source, destination)


# torch-spyre's history, for the tests that compile with its real front half: a git bundle
# or a clone, by path. `.ci/run` sets both variables; elsewhere, without the first, those
# tests skip and say how to run them.
TORCH_SPYRE_HISTORY = "SPYRE_REGRESS_TORCH_SPYRE_BUNDLE"
TORCH_SPYRE_REQUIRED = "SPYRE_REGRESS_REQUIRE_TORCH_SPYRE"


@pytest.fixture(scope="session")
def torch_spyre_history() -> Path:
    """The torch-spyre history the tests compile from (a bundle or a clone)."""
    given = os.environ.get(TORCH_SPYRE_HISTORY)
    if not given:
        message = (f"torch-spyre's history is needed: set {TORCH_SPYRE_HISTORY} to a git "
                   "bundle or clone of torch-spyre (github.com/torch-spyre/torch-spyre) "
                   "to run the tests that compile with it (docs/how-to/torch-spyre.md)")
        if os.environ.get(TORCH_SPYRE_REQUIRED):
            pytest.fail(message)
        pytest.skip(message)
    path = Path(given)
    if not path.exists():
        pytest.fail(f"{TORCH_SPYRE_HISTORY}={given} does not exist")
    return path


@pytest.fixture(scope="session")
def torch_spyre_checkout(torch_spyre_history, tmp_path_factory) -> Path:
    """A clone of torch-spyre's history, at its newest commit, made once per worker."""
    clone = tmp_path_factory.mktemp("torch-spyre") / "torch-spyre"
    subprocess.run(["git", "clone", "-q", str(torch_spyre_history), str(clone)], check=True,
                   timeout=600)
    return clone
