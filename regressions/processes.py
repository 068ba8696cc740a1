"""The one module that starts processes other than git: probes in commit checkouts, and asv.

A probe runs `regressions/probing/probe.py` with `python -P` (the script's own directory stays off
sys.path) and PYTHONPATH pointing at one commit's checkout, so that commit's spyre_sim is the
one imported. Checkouts are exported trees (`git archive`), cached per commit. A probe is
forked from a server that imported torch once (`regressions/probing/forkserver.py`, one per
environment, kept for the tool's life), which spares each probe ~2 s of imports;
`SPYRE_REGRESS_PROBE_FORKSERVER=0` starts each probe as a fresh interpreter instead.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import json
import os
import queue
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from regressions import git
from regressions.errors import SpyreRegressError

PROBE = Path(__file__).parent / "probing" / "probe.py"
FORKSERVER = Path(__file__).parent / "probing" / "forkserver.py"
FORKSERVER_SWITCH = "SPYRE_REGRESS_PROBE_FORKSERVER"  # "0": a fresh interpreter per probe


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
            done = _run_python([str(PROBE), command, str(request_path), str(result_path)],
                               Path(scratch), _environment(checkout, env), timeout)
        except subprocess.TimeoutExpired:
            return {"status": "failed", "detail": f"probe timed out after {timeout:.0f} s"}
        if interrupted(done.returncode):
            # Ctrl-C reached the probe's process group too: an interruption of this run,
            # never a measurement outcome of the commit
            raise KeyboardInterrupt
        if not result_path.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {"status": "untestable",
                    "detail": f"{exit_reason(done.returncode)}: {' | '.join(tail)}".rstrip(": ")}
        return json.loads(result_path.read_text())


def _run_python(argv: list[str], cwd: Path, env: dict[str, str], timeout: float
                ) -> subprocess.CompletedProcess:
    """`python -P ARGV` in `cwd` with `env`: forked from this environment's server where it
    has one that can fork, else a fresh interpreter. Raises subprocess.TimeoutExpired."""
    key = tuple(sorted((k, v) for k, v in env.items() if k != "PYTHONPATH"))
    server = None if env.get(FORKSERVER_SWITCH) == "0" else _SERVERS.take(key)
    if server is None:
        return subprocess.run([sys.executable, "-P", *argv], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
    try:
        done = server.run(argv, cwd, env, timeout)
    except BaseException:
        server.close()  # a job may still be running on it: never hand it out again
        raise
    _SERVERS.give_back(key, server)
    return done


class _ForkServer:
    """One running regressions/probing/forkserver.py and its line protocol."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-P", str(FORKSERVER)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            cwd=tempfile.gettempdir())
        self._buffer = b""
        try:
            ready = self._message(time.monotonic() + 300)
        except subprocess.TimeoutExpired:
            ready = None
        self.usable = bool(ready and ready.get("ready") and ready.get("threads") == 1)

    def _message(self, deadline: float) -> dict | None:
        """The server's next line, waiting until `deadline`; None once it has exited."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise subprocess.TimeoutExpired([str(FORKSERVER)], 0)
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _answer(self, deadline: float) -> dict:
        """The server's next line about a job; an error if the server has gone."""
        message = self._message(deadline)
        if message is None:
            raise SpyreRegressError("the probe fork server ended unexpectedly; rerun with "
                                    f"{FORKSERVER_SWITCH}=0 to start each probe afresh")
        return message

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float
            ) -> subprocess.CompletedProcess:
        assert self.process.stdin is not None
        out, err = cwd / ".probe-stdout", cwd / ".probe-stderr"
        job = {"argv": argv, "cwd": str(cwd), "env": env, "stdout": str(out),
               "stderr": str(err)}
        self.process.stdin.write((json.dumps(job) + "\n").encode())
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        started = self._answer(deadline)
        try:
            ended = self._answer(deadline)
        except BaseException:  # timed out, or Ctrl-C: the probe must not outlive the wait
            with contextlib.suppress(ProcessLookupError):
                os.kill(started["pid"], signal.SIGKILL)
            raise
        return subprocess.CompletedProcess(
            argv, ended["returncode"], out.read_text(errors="replace") if out.exists() else "",
            err.read_text(errors="replace") if err.exists() else "")

    def close(self) -> None:
        _end(self.process, timeout=5)


class _ForkServers:
    """Idle fork servers by environment; as many per environment as probes ran at once."""

    def __init__(self) -> None:
        self._idle: dict[tuple, list[_ForkServer]] = {}
        self._cannot_fork: set[tuple] = set()
        self._lock = threading.Lock()
        atexit.register(self.close)

    def take(self, key: tuple) -> _ForkServer | None:
        with self._lock:
            if key in self._cannot_fork:
                return None
            if self._idle.get(key):
                return self._idle[key].pop()
        server = _ForkServer(dict(key))
        if server.usable:
            return server
        server.close()
        with self._lock:
            self._cannot_fork.add(key)
        return None

    def give_back(self, key: tuple, server: _ForkServer) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append(server)

    def close(self) -> None:
        with self._lock:
            servers = [s for idle in self._idle.values() for s in idle]
            self._idle.clear()
        for server in servers:
            server.close()


_SERVERS = _ForkServers()


def interrupted(returncode: int) -> bool:
    """Whether a child ended by Ctrl-C: killed by SIGINT, or Python's exit for an uncaught
    KeyboardInterrupt in a process whose SIGINT handler was replaced (130)."""
    return returncode in (-signal.SIGINT, 128 + signal.SIGINT)


def exit_reason(returncode: int) -> str:
    """How a probe ended, in words: "probe exited 3", or for a signal its name and the
    likely reason (SIGKILL from outside is almost always the kernel's out-of-memory killer)."""
    if returncode >= 0:
        return f"probe exited {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    reasons: dict[int, str] = {
        signal.SIGKILL: "; likely out of memory (the kernel's OOM killer): try a smaller "
                        "--shape or --width",
        signal.SIGSEGV: "; the process crashed", signal.SIGTERM: "; something stopped it"}
    why = reasons.get(number, "")
    return f"probe killed by {name} (signal {number}){why}"


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
            try:
                code = self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = 0
            if interrupted(code):
                raise KeyboardInterrupt
            raise SpyreRegressError(f"a minimization worker ended unexpectedly "
                                    f"({exit_reason(code)}); rerun with a smaller program or "
                                    "check that the commit still imports")
        return json.loads(line)

    def close(self) -> None:
        _end(self._process, timeout=30)
        self._scratch.cleanup()


def _end(process: subprocess.Popen, timeout: float) -> None:
    """Close a line-driven child's stdin (it exits at end of input); kill it if it has not
    ended within `timeout` seconds."""
    with contextlib.suppress(OSError):
        if process.stdin:
            process.stdin.close()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def still_running(progress: Callable[[str], None], what: str,
                  every: float = 30.0) -> Iterator[None]:
    """"{what} (still running after N s)" every `every` seconds while the block runs, so a
    step of minutes (callgrind counting a compile) is not minutes of silence."""
    started, done = time.monotonic(), threading.Event()

    def remind() -> None:
        while not done.wait(every):
            progress(f"{what} (still running after {time.monotonic() - started:.0f} s)")

    reminder = threading.Thread(target=remind, daemon=True)
    reminder.start()
    try:
        yield
    finally:
        done.set()
        reminder.join()


# asv's log lines: "· Creating environments", "·· Installing requirements for ..." before it
# counts, "[ 25.00%] ·· Benchmarking ..." once it does (asv_runner.console.Log).
STILL_RUNNING_EVERY = 30.0  # seconds between reminders that a long asv step is still running
_ASV_PERCENT = re.compile(r"^\[\s*[\d.]+%\]\s*")


def asv_progress(line: str) -> str | None:
    """The line if it is one of asv's step or progress lines worth showing, else None (result
    tables, their rules and parameter headers, pip's output)."""
    text = line.strip()
    if not text.startswith(("[", "\u00b7")):
        return None
    body = _ASV_PERCENT.sub("", text).lstrip("\u00b7 ")
    if not body or set(body) <= set("=- ") or body.startswith("For parameters"):
        return None
    return text


def output_as_it_comes(pipe: IO[bytes], idle: float = 0.5) -> Iterator[tuple[str, bool]]:
    """(text, complete) pieces of a process's output: each complete line as it ends, and the
    unfinished line once the output has been idle for `idle` seconds. asv ends a log line only
    when it starts the next, so "Installing requirements ..." would otherwise show only once
    the install is over. On idle with nothing pending, ("", False), so callers can check
    a deadline."""
    chunks: queue.Queue[bytes | None] = queue.Queue()

    def read() -> None:
        while data := os.read(pipe.fileno(), 65536):
            chunks.put(data)
        chunks.put(None)

    threading.Thread(target=read, daemon=True).start()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending = ""
    while True:
        try:
            data = chunks.get(timeout=idle)
        except queue.Empty:
            yield pending, False
            continue
        if data is None:
            break
        *complete, pending = (pending + decoder.decode(data)).split("\n")
        for line in complete:
            yield line, True
    if pending:
        yield pending, True


def run_asv(arguments: list[str], cwd: Path, env: dict[str, str] | None = None,
            stream: Callable[[str], None] | None = None,
            timeout: float = 3600.0) -> subprocess.CompletedProcess:
    """Run asv from this interpreter's environment (asv is a project dependency).

    With `stream`, asv's step and progress lines (`asv_progress`) are passed on as they
    appear, so creating the environment (a minute on the first run) names its steps too.
    """
    command = [sys.executable, "-m", "asv", *arguments]
    environment = {**os.environ, **(env or {})}
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    try:
        lines = _follow(process, arguments, stream, timeout)
    finally:
        if process.poll() is None:  # interrupted, or past the deadline
            process.kill()
            process.wait()
    if interrupted(process.returncode):
        raise KeyboardInterrupt
    return subprocess.CompletedProcess(command, process.returncode, "".join(lines), "")


def _follow(process: subprocess.Popen, arguments: list[str],
            stream: Callable[[str], None] | None, timeout: float) -> list[str]:
    """asv's output lines until it ends, its progress passed on to `stream`."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    last_shown, first_shown, reminded = None, 0.0, 0.0
    for text, complete in output_as_it_comes(process.stdout):
        if complete:
            lines.append(text + "\n")
        shown = asv_progress(text) if stream is not None else None
        if shown is not None and not complete and shown.startswith("["):
            shown = None  # a benchmark line still running: it ends in seconds
        now = time.monotonic()
        if stream is not None and shown is not None:
            if shown != last_shown:  # an unfinished line, then finished
                stream("asv " + shown)
                first_shown = reminded = now
            elif not complete and now - reminded >= STILL_RUNNING_EVERY:
                stream(f"asv {shown} (still running after {now - first_shown:.0f} s)")
                reminded = now
        last_shown = shown if not complete else None
        if now > deadline:
            raise SpyreRegressError(f"asv {arguments[0]} ran longer than {timeout:.0f} s; "
                                    "run fewer commits (--stride) or fewer benchmarks (--bench)")
    process.wait()
    return lines
