"""The stage-capture protocol: what `TORCH_COMPILE_DEBUG=1` writes for each compile.

One directory per compile under `SPYRE_SIM_DEBUG_DIR` (default `torch_compile_debug/`),
named `compile-NNN`. Inside: `<n>-<stage>.<ext>` with each stage's canonical text (n = 1..8
in pipeline order), the backend's binary (`7-backend.cbor`), the compile log (`compile.log`)
and `stages.json`, which indexes them with per-stage wall times. The stage bisector reads this
format and nothing else, so any backend that writes it can be stage-bisected.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

STAGE_CAPTURE_VERSION = 1
STAGE_EXTENSIONS = {"sdsc": "json"}


def debug_root() -> Path | None:
    if os.environ.get("TORCH_COMPILE_DEBUG", "") not in ("1", "true", "True"):
        return None
    return Path(os.environ.get("SPYRE_SIM_DEBUG_DIR") or "torch_compile_debug")


def stage_file(index: int, stage: str) -> str:
    return f"{index}-{stage}.{STAGE_EXTENSIONS.get(stage, 'txt')}"


class _ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@contextlib.contextmanager
def compile_log(enabled: bool) -> Iterator[list[str]]:
    """Collect every `spyre_sim.*` log record emitted while compiling (when capturing)."""
    lines: list[str] = []
    if not enabled:
        yield lines
        return
    logger = logging.getLogger("spyre_sim")
    handler = _ListHandler()
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
        lines.extend(handler.lines)


def write(
    root: Path,
    stages: tuple[str, ...],
    texts: dict[str, str],
    wall_s: dict[str, float],
    binaries: list[bytes],
    log_lines: list[str],
    summary: dict,
) -> Path:
    """Write one compile's capture into a fresh `compile-NNN` directory under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    index = 0
    while True:
        directory = root / f"compile-{index:03d}"
        try:
            directory.mkdir()
            break
        except FileExistsError:
            index += 1
    entries = []
    for number, stage in enumerate(stages, start=1):
        name = stage_file(number, stage)
        (directory / name).write_text(texts[stage])
        entries.append({"index": number, "name": stage, "file": name,
                        "wall_s": round(wall_s.get(stage, 0.0), 6)})
    binary_files = []
    for graph, payload in enumerate(binaries):
        name = "7-backend.cbor" if graph == 0 else f"7-backend.g{graph}.cbor"
        (directory / name).write_bytes(payload)
        binary_files.append(name)
    (directory / "compile.log").write_text("\n".join(log_lines) + ("\n" if log_lines else ""))
    index_doc = {"version": STAGE_CAPTURE_VERSION, "stages": entries, "binaries": binary_files,
                 "log": "compile.log", **summary}
    (directory / "stages.json").write_text(json.dumps(index_doc, indent=1, sort_keys=True) + "\n")
    return directory
