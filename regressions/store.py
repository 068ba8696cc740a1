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

SCHEMA_VERSION = 3  # 3: one lifecycle record (regressions.lifecycle) per row


class RecordStore:
    """The nightly's alert records in SQLite (`lifecycle.AlertRecord`, one row each, with the
    report written for it and the first divergent stage), read and written whole: the
    lifecycle decides every transition, this class only keeps them across nights."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        if path.exists() and not path.is_file():
            raise SpyreRegressError(f"{path} is not a file; pass the nightly's --state "
                                    "directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(path)
        self.connection.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, "
                                "value TEXT)")
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY, status TEXT NOT NULL, "
            "kind TEXT, document TEXT NOT NULL, stage TEXT, report TEXT, updated REAL)")
        self._update_to_3()
        self.connection.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                                (str(SCHEMA_VERSION),))
        self.connection.commit()

    def _update_to_3(self) -> None:
        """Versions 1 and 2 kept one detected alert per row: each becomes a record."""
        from regressions import lifecycle
        from regressions.detect import Alert

        tables = {row[0] for row in self.connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "alerts" not in tables or self.records():
            return
        for row in self.connection.execute(
                "SELECT id, status, document, culprit, stage, report FROM alerts").fetchall():
            alert = Alert.from_dict(_alert_v2(json.loads(row[2])))
            record = lifecycle.AlertRecord(
                row[0], alert.kind, alert.good_commit, alert.bad_commit,
                lifecycle.symptoms_of(alert), row[1], culprit=row[3],
                note="kept from a schema-2 database")
            self.save([record], {row[0]: {"stage": row[4], "report": row[5]}})

    def records(self) -> list:
        """Every stored `lifecycle.AlertRecord`, by id."""
        from regressions import lifecycle

        return [lifecycle.from_dict(json.loads(document)) for (document,) in
                self.connection.execute("SELECT document FROM records ORDER BY id")]

    def extras(self) -> dict[int, dict[str, str | None]]:
        """Per record id: the first divergent stage and the report folder, where known."""
        return {row[0]: {"stage": row[1], "report": row[2]} for row in self.connection.execute(
            "SELECT id, stage, report FROM records")}

    def save(self, records: Sequence, extras: dict[int, dict] | None = None) -> None:
        """Store `records` (new or changed) in one transaction, with their extras."""
        from regressions import lifecycle

        extras = extras or {}
        with self.connection:
            for record in records:
                known = self.extras().get(record.id, {})
                extra = {**known, **extras.get(record.id, {})}
                self.connection.execute(
                    "INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (record.id, record.status, record.kind,
                     json.dumps(to_json(lifecycle.to_dict(record))), extra.get("stage"),
                     extra.get("report"), time.time()))

    def close(self) -> None:
        self.connection.close()


def _alert_v2(document: dict) -> dict:
    """A version-2 alert document: version-1 rows lacked the members' own fields."""
    from regressions.detect import _update_to_2

    member = (document.get("members") or [{}])[0]
    return document if "good_position" in member else _update_to_2(document)


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
