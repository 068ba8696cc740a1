"""The one module that starts processes other than git: probes in commit checkouts, and asv.

A probe runs `regressions/probe.py` with `python -P` (the script's own directory stays off
sys.path) and PYTHONPATH pointing at one commit's checkout, so that commit's spyre_sim is the
one imported. Checkouts are exported trees (`git archive`), cached per commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from regressions import git
from regressions.errors import SpyreRegressError

PROBE = Path(__file__).with_name("probe.py")


class Checkouts:
    """Exported trees of commits under `root`, created on first use."""

    def __init__(self, repo: Path, root: Path) -> None:
        self.repo, self.root = Path(repo), Path(root)

    def path(self, sha: str) -> Path:
        target = self.root / sha
        if not (target / ".complete").exists():
            git.export_tree(self.repo, sha, target)
            (target / ".complete").write_text(sha + "\n")
        return target


def _environment(checkout: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TORCH_COMPILE_DEBUG", "SPYRE_SIM_DEBUG_DIR")}
    env.update(extra or {})
    env["PYTHONPATH"] = str(checkout)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_probe(checkout: Path, command: str, request: dict[str, Any],
              timeout: float = 600.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one probe command in `checkout`; its JSON answer (status ok/failed/untestable)."""
    with tempfile.TemporaryDirectory(prefix="spyre-probe-") as scratch:
        request_path, result_path = Path(scratch, "request.json"), Path(scratch, "result.json")
        request_path.write_text(json.dumps(request))
        try:
            done = subprocess.run(
                [sys.executable, "-P", str(PROBE), command, str(request_path), str(result_path)],
                cwd=scratch, env=_environment(checkout, env), capture_output=True, text=True,
                timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"status": "failed", "detail": f"probe timed out after {timeout:.0f} s"}
        if not result_path.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {"status": "untestable",
                    "detail": f"probe exited {done.returncode}: {' | '.join(tail)}"}
        return json.loads(result_path.read_text())


class Worker:
    """A long-lived probe answering one candidate program per line (for minimization)."""

    def __init__(self, checkout: Path, request: dict[str, Any],
                 env: dict[str, str] | None = None) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="spyre-worker-")
        scratch = Path(self._scratch.name)
        request_path = scratch / "request.json"
        request_path.write_text(json.dumps(request))
        self._process = subprocess.Popen(
            [sys.executable, "-P", str(PROBE), "worker", str(request_path),
             str(scratch / "result.json")],
            cwd=scratch, env=_environment(checkout, env), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def ask(self, candidate: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(candidate) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise SpyreRegressError("a minimization worker exited unexpectedly; rerun with a "
                                    "smaller program or check that the commit still imports")
        return json.loads(line)

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._scratch.cleanup()


def run_asv(arguments: list[str], cwd: Path, env: dict[str, str] | None = None,
            stream: Callable[[str], None] | None = None,
            timeout: float = 3600.0) -> subprocess.CompletedProcess:
    """Run asv from this interpreter's environment (asv is a project dependency).

    With `stream`, asv's progress lines ("[ 25.00%] ...") are passed on as they appear.
    """
    command = [sys.executable, "-m", "asv", *arguments]
    environment = {**os.environ, **(env or {})}
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if stream is not None and line.lstrip().startswith("["):
            stream("asv " + line.strip())
        if time.monotonic() > deadline:
            process.kill()
            raise SpyreRegressError(f"asv {arguments[0]} ran longer than {timeout:.0f} s; "
                                    "run fewer commits (--stride) or fewer benchmarks (--bench)")
    process.wait()
    return subprocess.CompletedProcess(command, process.returncode, "".join(lines), "")
