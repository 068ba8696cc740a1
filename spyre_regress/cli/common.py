"""What the subcommands share: argument types, progress, output helpers, exit codes."""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from regressions import codec
from regressions.records import files

EXIT_OK, EXIT_REGRESSED, EXIT_USAGE = 0, 1, 2
_STARTED = [time.monotonic()]
# The largest program a probe is asked to build: 8x the catalogue's largest sequence length
# (benchmarks/workloads.SEQ_LENGTHS) and 4x its widest model. Beyond them a typo (seq 99999)
# would only show minutes later as a probe killed for want of memory.
MAX_SEQ, MAX_WIDTH = 8192, 16384


def elapsed() -> float:
    """Seconds since the command started."""
    return time.monotonic() - _STARTED[0]


def progress(message: str) -> None:
    """Progress on stderr, with the time since the command started."""
    print(f"[{elapsed():7.1f}s] {message}", file=sys.stderr, flush=True)


def add_parser(sub: argparse._SubParsersAction, name: str, summary: str, description: str,
               example: str) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with one example."""
    return sub.add_parser(name, help=summary, description=description,
                          epilog=f"example:\n  {example}",
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate in (0, 1], e.g. 0.05")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def scheduler_address(text: str) -> str:
    from spyre_regress.executor import ADDRESS  # the executor's own rule, without Dask

    if not ADDRESS.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a scheduler address; give "
                                         "tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786")
    return text


def ref(text: str) -> str:
    """A git revision from the command line: untrusted, so one that git would read as an
    option (`-x`) or that holds a control character is refused before git sees it."""
    from regressions import git
    from regressions.errors import SpyreRegressError

    try:
        return git.check_ref(text)
    except SpyreRegressError as refused:
        raise argparse.ArgumentTypeError(str(refused)) from None


def regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"bad regular expression {text!r}: {exc}") from None
    return text


def threshold(text: str) -> tuple[str, float]:
    pattern, sep, fraction = text.rpartition("=")
    try:
        value = float(fraction)
    except ValueError:
        value = -1.0
    if not sep or not pattern or not value >= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not REGEX=FRACTION with a fraction >= 0 (0.05 is 5%), e.g. "
            "'compile\\.=0.1'")
    return regex(pattern), value


def say_large_floors(floors: list[tuple[str, float]]) -> None:
    """A floor above 100% is allowed (only regressions worse than x2 and more), but is more
    often a percentage typed as a fraction: say what it means, once per floor."""
    for pattern, value in floors:
        if value > 1:
            print(f"spyre-regress: warning: --threshold '{pattern}={value:g}' is a floor of "
                  f"{value:.0%}: only regressions worse than x{1 + value:.2f} are reported "
                  f"there; for {value:g}% pass {value / 100:g}", file=sys.stderr)


def sequence_length(text: str) -> int:
    digits = text[3:] if text.startswith("seq") else text
    if not digits.isdigit() or not 1 <= int(digits) <= MAX_SEQ:
        raise argparse.ArgumentTypeError(f"{text!r} is not a sequence length from 1 to "
                                         f"{MAX_SEQ}, e.g. 127")
    return int(digits)


def width(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_WIDTH:
        raise argparse.ArgumentTypeError(f"{text!r} is not a model width from 1 to "
                                         f"{MAX_WIDTH}, e.g. 512")
    return int(text)


def positive(text: str) -> int:
    """A count of at least 1 (--stride, --alert)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


@contextlib.contextmanager
def work_dir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="spyre-regress-") as scratch:
        yield Path(scratch)


def write_json(path: Path | None, document: object, version: int) -> None:
    """The command's result as a versioned JSON file; `path` was checked writable before the
    work (`checks.writable_file`)."""
    if path is not None:
        files.write_json(path, {"version": version, **codec.to_json(document)})
        print(f"wrote {path}")


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


class _StderrHandler(logging.Handler):
    """Warnings from the library as one `spyre-regress: warning: ...` line each."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"spyre-regress: {record.levelname.lower()}: {record.getMessage()}",
              file=sys.stderr)


def show_warnings(verbose: bool = False) -> None:
    """The library's warnings on stderr, one line each; with `verbose` its info lines too
    (e.g. each result file a store's reading left out)."""
    level = logging.INFO if verbose else logging.WARNING
    for name in ("regressions", "spyre_regress"):
        logger = logging.getLogger(name)
        handler = next((h for h in logger.handlers if isinstance(h, _StderrHandler)), None)
        if handler is None:
            handler = _StderrHandler(level)
            logger.addHandler(handler)
        handler.setLevel(level)
        if verbose:
            logger.setLevel(logging.INFO)
