import os
import subprocess
import sys
from pathlib import Path

import pytest

import spyre_sim
from benchmarks import workloads

# The console script pip installed beside this interpreter: what a user runs.
SCRIPT = Path(sys.executable).with_name("spyre-regress")


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
