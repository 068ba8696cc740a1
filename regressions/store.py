"""The files this package reads and writes outside asv itself: stage captures, JSON documents,
measurements in asv's results format, and the nightly alert database.

Writes are atomic (write a temporary file, then rename), so an interrupted run leaves either
the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from regressions.errors import SpyreRegressError
from regressions.records import to_json

CAPTURE_VERSION = 1
RESULT_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
                  "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
                  "samples", "profile"]  # asv results format version 2 (asv docs, dev.rst)


def write_text(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as stream:
        stream.write(text)
    os.replace(temporary, path)
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


def load_capture(directory: Path):
    """A stage capture (`stages.Capture`) written by TORCH_COMPILE_DEBUG=1, in the protocol of
    spyre_sim/debug_capture.py."""
    from regressions.stages import Capture  # statistics with it: imported when needed

    directory = Path(directory)
    index = read_json(directory / "stages.json", "stage index")
    if index.get("version") != CAPTURE_VERSION:
        raise SpyreRegressError(f"{directory}/stages.json has version {index.get('version')!r};"
                                f" this tool reads version {CAPTURE_VERSION}")
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


def _stats(samples: Sequence[float]) -> tuple[float, float, float, float, float]:
    ordered = sorted(samples)

    def quantile(q: float) -> float:
        position = q * (len(ordered) - 1)
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    return quantile(0.5), quantile(0.005), quantile(0.995), quantile(0.25), quantile(0.75)


def record_measurement(results_dir: Path, machine: str, env_name: str, commit: str,
                       commit_date_ms: int, benchmark: str, param_index: int, combos: int,
                       params: Sequence[Sequence[str]], samples: Sequence[float],
                       deterministic: bool, benchmark_version: str | None) -> Path:
    """Merge one measurement into `results/<machine>/<commit8>-<env>.json` (asv format 2).

    Combinations not measured stay NaN (asv's "skipped"), so readers see exactly what ran.
    """
    path = Path(results_dir) / machine / f"{commit[:8]}-{env_name}.json"
    document = json.loads(path.read_text()) if path.exists() else {
        "commit_hash": commit, "env_name": env_name, "date": commit_date_ms,
        "params": {"machine": machine}, "python": "", "requirements": {}, "env_vars": {},
        "result_columns": RESULT_COLUMNS, "results": {}, "durations": {}, "version": 2}
    row = document["results"].get(benchmark)
    nan = float("nan")
    if row is None:
        row = [[nan] * combos, [list(p) for p in params], benchmark_version, None, None] + \
              [[nan] * combos for _ in range(6)] + [[None] * combos, None]
    median, low, high, q25, q75 = _stats(samples)
    row[0][param_index] = median
    row[3] = int(time.time() * 1000)
    for column, value in (("stats_ci_99_a", low), ("stats_ci_99_b", high), ("stats_q_25", q25),
                          ("stats_q_75", q75), ("stats_number", 1),
                          ("stats_repeat", len(samples))):
        row[RESULT_COLUMNS.index(column)][param_index] = value
    if not deterministic:
        previous = row[RESULT_COLUMNS.index("samples")][param_index] or []
        row[RESULT_COLUMNS.index("samples")][param_index] = list(previous) + list(samples)
    document["results"][benchmark] = row
    write_text(path, json.dumps(document, allow_nan=True) + "\n")
    machine_file = Path(results_dir) / machine / "machine.json"
    if not machine_file.exists():
        write_json(machine_file, {"machine": machine, "version": 1})
    return path


# --- nightly alert state ------------------------------------------------------------------

ALERT_STATES = ("new", "reported", "not-reproduced", "acknowledged", "fixed", "invalid")
SCHEMA_VERSION = 2  # 2: the `note` column (why an alert was not reproduced)


class AlertStore:
    """Alerts in SQLite: one row per root cause, so each is reported once and can be triaged."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(path)
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS alerts (id INTEGER PRIMARY KEY, key TEXT UNIQUE, "
            "status TEXT NOT NULL, kind TEXT, good TEXT, bad TEXT, culprit TEXT, stage TEXT, "
            "report TEXT, document TEXT, created REAL, updated REAL, note TEXT)")
        columns = {row[1] for row in self.connection.execute("PRAGMA table_info(alerts)")}
        if "note" not in columns:  # update_to_2: a version-1 database
            self.connection.execute("ALTER TABLE alerts ADD COLUMN note TEXT")
        self.connection.execute(
            "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        self.connection.commit()

    def upsert(self, key: str, kind: str, good: str, bad: str, document: dict) -> tuple[int, bool]:
        """(alert id, True when new). An alert seen before keeps its id and status."""
        row = self.connection.execute("SELECT id FROM alerts WHERE key = ?", (key,)).fetchone()
        if row:
            return row[0], False
        now = time.time()
        cursor = self.connection.execute(
            "INSERT INTO alerts (key, status, kind, good, bad, document, created, updated) "
            "VALUES (?, 'new', ?, ?, ?, ?, ?, ?)",
            (key, kind, good, bad, json.dumps(document), now, now))
        self.connection.commit()
        return int(cursor.lastrowid), True

    def status(self, alert_id: int) -> str:
        row = self.connection.execute("SELECT status FROM alerts WHERE id = ?",
                                      (alert_id,)).fetchone()
        if row is None:
            raise SpyreRegressError(f"there is no alert {alert_id}; `spyre-regress alerts` "
                                    "lists them")
        return row[0]

    def update(self, alert_id: int, **fields: Any) -> None:
        allowed = {"status", "culprit", "stage", "report", "note"}
        if set(fields) - allowed:
            raise ValueError(f"unknown alert fields {sorted(set(fields) - allowed)}")
        if "status" in fields and fields["status"] not in ALERT_STATES:
            raise SpyreRegressError(f"alert status must be one of {list(ALERT_STATES)}, "
                                    f"not {fields['status']!r}")
        assignments = ", ".join(f"{name} = ?" for name in fields)
        cursor = self.connection.execute(
            f"UPDATE alerts SET {assignments}, updated = ? WHERE id = ?",
            (*fields.values(), time.time(), alert_id))
        if cursor.rowcount == 0:
            raise SpyreRegressError(f"there is no alert {alert_id}; `spyre-regress alerts` "
                                    "lists them")
        self.connection.commit()

    def rows(self) -> list[dict]:
        cursor = self.connection.execute(
            "SELECT id, key, status, kind, good, bad, culprit, stage, report, note FROM alerts "
            "ORDER BY id")
        names = [c[0] for c in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def close(self) -> None:
        self.connection.close()


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
