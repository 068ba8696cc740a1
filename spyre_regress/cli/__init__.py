"""`spyre-regress`: the command line, one module per command (as asv's `commands/`).

Command modules import what pulls in torch or matplotlib inside `run()`, so `--help`,
`--version` and usage errors answer without loading the compiler.

Exit codes (`EXIT_CODES`, printed by `--help` and listed in the README): 0 success / nothing
regressed, 1 regressions found or a negative answer, 2 usage or input error (one line naming
the problem and the fix), 70 a fault of the tool itself (one line saying where the traceback
was written), 130 interrupted, 141 the reader of the output went away (`| head`: quiet, as
a program killed by SIGPIPE).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from regressions.errors import SpyreRegressError
from spyre_regress import __version__
from spyre_regress.cli import (
    alerts,
    benchmark,
    bisect,
    common,
    demo,
    detect,
    knobs,
    merge_results,
    minimize,
    nightly,
    report,
    stages,
    suite,
)

# In the order of the workflow: try it, run it nightly, then each step by hand.
COMMANDS = (demo, nightly, detect, bisect, stages, knobs, minimize, report, alerts, benchmark,
            merge_results, suite)
EXIT_FAULT, EXIT_INTERRUPTED, EXIT_PIPE = 70, 130, 141
EXIT_CODES = ("exit codes: 0 nothing regressed or the answer was found, 1 regressions found "
              "or a negative answer (each command's --help says which), 2 usage or input "
              "error, 70 a fault of the tool (the traceback's file is named), 130 "
              "interrupted, 141 output pipe closed")


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line naming the problem and where help is, like
    every other input error (exit 2)."""

    def error(self, message: str):
        self.exit(common.EXIT_USAGE, f"spyre-regress: error: {message} (see `{self.prog} "
                                     "--help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="spyre-regress",
        description="Regression benchmarking for the Spyre torch.compile backend.",
        epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = int(args.handler(args))
        sys.stdout.flush()  # a closed pipe shows here, not at exit as an ignored exception
        return code
    except BrokenPipeError:
        return _pipe_closed()
    except SpyreRegressError as exc:
        print(f"spyre-regress: error: {exc}", file=sys.stderr)
        return common.EXIT_USAGE
    except KeyboardInterrupt:
        print("spyre-regress: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        if exc.filename is None:  # not about a path the user gave: a fault of ours
            return _fault(exc)
        print(f"spyre-regress: error: cannot use {exc.filename}: {exc.strerror}; check the "
              "path and its permissions", file=sys.stderr)
        return common.EXIT_USAGE
    except Exception as exc:
        return _fault(exc)


def _pipe_closed() -> int:
    """The reader of our output went away (`spyre-regress alerts | head -1`): say nothing,
    and keep the interpreter's final flush from raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_PIPE


def _fault(exc: Exception) -> int:
    """A bug of ours: one line, and the traceback in a file."""
    path = _save_traceback()
    print(f"spyre-regress: internal error: {type(exc).__name__}: {exc} (the traceback is "
          f"in {path}; please report it)", file=sys.stderr)
    return EXIT_FAULT


def _save_traceback() -> Path:
    handle = tempfile.NamedTemporaryFile(
        "w", prefix=f"spyre-regress-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".txt",
        delete=False)
    with handle:
        handle.write(traceback.format_exc())
    return Path(handle.name)


if __name__ == "__main__":
    sys.exit(main())
