"""Grids kept by a digest of everything their values depend on.

Two families compute deterministic values for a whole grid once per commit in `setup_cache`:
instructions per compile stage (one valgrind run, about a minute) and numerical error per
stage (35 compiles and references, about 10 s). `asv continuous main HEAD` measures `main`
again on every call, and both sides of a change that leaves the compiler alone compute the
same numbers. Given the compiler's source files, the measuring code, every installed
distribution's version, the interpreter and the processor, the values are the same, so a grid
is kept under a digest of those and computed again only when one of them changes.

The grids live in `$XDG_CACHE_HOME/spyre-regress/<family>` (default `~/.cache`);
`SPYRE_REGRESS_GRID_CACHE=<dir>` moves them and `=off` computes every time.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

CACHE_ENV = "SPYRE_REGRESS_GRID_CACHE"
T = TypeVar("T")


def cache_dir(family: str) -> Path | None:
    """Where a family's grids are kept; None when $SPYRE_REGRESS_GRID_CACHE says "off"."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen == "off":
        return None
    base = Path(chosen) if chosen else \
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spyre-regress"
    return base / family


@functools.cache
def processor() -> str:
    """The CPU's model and feature flags (Linux), else the platform's name for it: floating
    point kernels pick their code by the instructions the CPU offers."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    wanted = ("model name", "flags", "Features", "CPU part")
    seen: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name.strip() in wanted:
            seen.setdefault(name.strip(), value.strip())
    return json.dumps(seen, sort_keys=True)


def digest(inputs: Mapping[str, Any], files: Sequence[Path]) -> str | None:
    """A digest of `inputs` (the grid, format versions, tool versions), the `files` (the
    measuring code), the source files of the spyre_sim this interpreter imports (the commit
    under test, as asv installs it), every installed distribution's version, the interpreter
    and the processor. None when spyre_sim is absent."""
    spec = importlib.util.find_spec("spyre_sim")
    if spec is None or not spec.submodule_search_locations:
        return None
    hashed = hashlib.sha256(json.dumps({
        **inputs, "python": sys.version, "machine": platform.machine(),
        "processor": processor(),
        "distributions": sorted(f"{d.metadata['Name']}=={d.version}"
                                for d in importlib.metadata.distributions())},
        sort_keys=True, default=str).encode())
    package = Path(next(iter(spec.submodule_search_locations)))
    sources = [(f"spyre_sim/{path.relative_to(package)}", path)
               for path in sorted(package.rglob("*"))
               if path.is_file() and "__pycache__" not in path.parts]
    sources += [(path.name, path) for path in files]
    for name, path in sources:
        hashed.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return hashed.hexdigest()


def kept(family: str, key: str | None, compute: Callable[[], T],
         encode: Callable[[T], dict], decode: Callable[[dict], T]) -> T:
    """The grid kept under `key`, else `compute()`, kept for next time (not when `key` is
    None or the cache is off). A kept document that `decode` cannot read (damaged, or of
    another format version) is computed again."""
    where = cache_dir(family)
    path = where / f"{key}.json" if where is not None and key else None
    if path is not None and path.exists():
        try:
            return decode(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError, RuntimeError):
            pass
    value = compute()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(encode(value)))
        partial.replace(path)  # atomic: a concurrent reader sees all of it or nothing
    return value
