"""A fork server for probes: torch imported once, one forked child per probe.

Every probe is a fresh `python -P probe.py ...` whose first ~2 s import torch and Dynamo,
before it measures anything; an investigation runs dozens. This script, started by
`regressions.processes` with a probe's environment (PYTHONPATH aside), imports what every
probe imports from the environment and nothing from a checkout, then reads one job per line
on stdin and forks: the child takes the job's environment, working directory, PYTHONPATH
(first on sys.path, as the interpreter puts it) and output files, and runs probe.py as
`__main__` - what `python -P probe.py` would do, minus the imports. asv runs its benchmarks
the same way (`launch_method: forkserver`).

Protocol, one JSON object per line: the server says {"ready": true, "threads": N} once;
per job {"argv", "cwd", "env", "stdout", "stderr"} it answers {"pid": P} when the child
starts and {"pid": P, "returncode": R} when it ends (R < 0: killed by signal -R). The
server ignores SIGINT: Ctrl-C is for the probe and the tool, which both see it. It exits
when stdin closes.
"""

import importlib
import json
import os
import runpy
import signal
import sys
import traceback

# Imported before any fork: the environment's packages every probe loads (a checkout's
# modules never: they must come from the commit under test).
PRELOAD = ("torch", "torch._dynamo", "torch._functorch.aot_autograd")


def _say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _child(job: dict) -> None:
    """Become the probe: never returns."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                (1, job["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, job["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            opened = os.open(path, flags, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        paths = [p for p in job["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:0] = paths
        importlib.invalidate_caches()
        sys.argv = list(job["argv"])
        runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int | None):
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except BaseException:  # noqa: BLE001 (the probe's own failure, reported as Python would)
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # the probe will say what is missing
    # A fork copies only the forking thread: any other (a pool some import started) could
    # hold a lock the child then waits on forever. The client falls back to a fresh process.
    _say({"ready": True, "threads": len(os.listdir("/proc/self/task"))
          if os.path.isdir("/proc/self/task") else 1})
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(job)
        _say({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _say({"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
