"""Files the tool writes outside asv itself, written atomically, and the nightly's lock.

Writes go to a temporary file in the same directory, then rename over the target, so an
interrupted run leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from regressions.codec import to_json
from regressions.errors import SpyreRegressError


def write_text(path: Path, text: str) -> Path:
    """`text` at `path`, atomically; the temporary file never outlives a failure."""
    path = Path(path)
    if path.is_dir():
        raise SpyreRegressError(f"{path} is a directory; pass a file path")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def write_json(path: Path, data: Any) -> Path:
    """`data` (dataclasses too, see `records.to_json`) as indented JSON, atomically."""
    return write_text(path, json.dumps(to_json(data), indent=1, sort_keys=True, default=str)
                      + "\n")


def read_json(path: Path, what: str, fix: str = "") -> Any:
    """The JSON document at `path`; `what` names it and `fix` says what to pass instead in
    the one-line error."""
    fix = f"; {fix}" if fix else ""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SpyreRegressError(f"{what} {path} does not exist{fix}") from None
    except IsADirectoryError:
        raise SpyreRegressError(f"{what} {path} is a directory, not a file{fix}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SpyreRegressError(f"{what} {path} is not valid JSON ({error}){fix}") from None


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """One nightly at a time: a lock file created atomically, removed on exit."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        holder = path.read_text().strip() if path.exists() else "?"
        if holder.isdigit() and not _alive(int(holder)):
            path.unlink(missing_ok=True)  # a crashed run left it behind
            handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        else:
            raise SpyreRegressError(f"another nightly run (pid {holder}) holds {path}; wait for "
                                    "it to finish, or remove the file if no run is active") \
                from None
    try:
        os.write(handle, str(os.getpid()).encode())
        os.close(handle)
        yield
    finally:
        path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
