"""Reading the stage-capture protocol: what a compile wrote under TORCH_COMPILE_DEBUG=1."""

from __future__ import annotations

from pathlib import Path

from regressions.errors import SpyreRegressError
from regressions.records.files import read_json

STAGE_CAPTURE_VERSION = 1


def load_capture(directory: Path):
    """A stage capture (`stages.Capture`) written by TORCH_COMPILE_DEBUG=1, in the protocol of
    spyre_sim/debug_capture.py."""
    from regressions.bisection.stages import Capture  # statistics with it: imported when needed

    directory = Path(directory)
    index = read_json(directory / "stages.json", "stage index")
    if index.get("version") != STAGE_CAPTURE_VERSION:
        raise SpyreRegressError(f"{directory}/stages.json has version {index.get('version')!r};"
                                f" this tool reads version {STAGE_CAPTURE_VERSION}")
    stages = tuple(entry["name"] for entry in index["stages"])
    texts = {e["name"]: (directory / e["file"]).read_text() for e in index["stages"]}
    wall = {e["name"]: float(e.get("wall_s", 0.0)) for e in index["stages"]}
    log_path = directory / index.get("log", "compile.log")
    return Capture(stages, texts, wall, log_path.read_text() if log_path.exists() else "")


def single_capture(root: Path) -> Path:
    """The one `compile-NNN` directory a probe's compile wrote under `root`."""
    found = sorted(Path(root).glob("compile-*"))
    if not found:
        raise SpyreRegressError(f"no stage capture under {root}: the compiler at this commit "
                                "does not write the stage-capture protocol (TORCH_COMPILE_DEBUG)")
    return found[0]
