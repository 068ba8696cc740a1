"""The nightly's alert records in SQLite, kept across nights."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from regressions.codec import to_json
from regressions.detection.alerts import alert_from_json
from regressions.errors import SpyreRegressError
from regressions.records import environment_records, lifecycle

# 3: one lifecycle record (regressions.records.lifecycle) per row; 4: the environment table
ALERT_STORE_VERSION = 4
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database
RECOVER = ("restore it from a backup, or move it away to start a new alert history (the "
           "reports and asv results stay)")
OURS = {"meta", "records", "alerts", "environment"}  # tables of this store, any version


def refuse_foreign(path: Path) -> None:
    """Refuse a path that is not this store's database, before SQLite touches it: SQLite
    would take an empty file as a new database and write a fresh schema into it, so an
    alert history truncated to 0 bytes would be replaced without a word."""
    if not path.exists():
        return
    if not path.is_file():
        raise SpyreRegressError(f"{path} is not a file; pass the nightly's --state directory")
    with path.open("rb") as stream:
        header = stream.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        what = "is empty" if not header else "is not an SQLite database"
        raise SpyreRegressError(f"the alert database {path} {what}; {RECOVER}")


def refuse_newer(connection: sqlite3.Connection, path: Path) -> None:
    """Refuse another program's database, or one a newer spyre-regress wrote."""
    tables = {row[0] for row in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and not tables & OURS:
        raise SpyreRegressError(f"{path} is an SQLite database of another program (tables "
                                f"{sorted(tables)}); pass the nightly's --state directory")
    if "meta" in tables:
        row = connection.execute(
            "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row and row[0].isdigit() and int(row[0]) > ALERT_STORE_VERSION:
            raise SpyreRegressError(f"the alert database {path} has schema version {row[0]}, "
                                    f"newer than this spyre-regress reads "
                                    f"({ALERT_STORE_VERSION}); upgrade spyre-regress")


class AlertStore:
    """The nightly's alert records in SQLite (`lifecycle.AlertRecord`, one row each, with the
    report written for it and the first divergent stage), read and written whole: the
    lifecycle decides every transition, this class only keeps them across nights."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        self.path = path
        refuse_foreign(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(path)
        with self._reading():
            refuse_newer(self.connection, path)
            self.connection.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, "
                                    "value TEXT)")
            self.connection.execute(
                "CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY, status TEXT NOT "
                "NULL, kind TEXT, document TEXT NOT NULL, stage TEXT, report TEXT, "
                "updated REAL)")
            # version 4: the environment alerts, kept apart (an older database gains the table)
            self.connection.execute("CREATE TABLE IF NOT EXISTS environment (id INTEGER "
                                    "PRIMARY KEY, document TEXT NOT NULL, updated REAL)")
            self._update_to_3()
            self.connection.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                                    (str(ALERT_STORE_VERSION),))
            self.connection.commit()

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """SQLite's complaints about the file (damaged, locked, read-only) as the user's to
        fix, naming the file; the file is left as it is."""
        try:
            yield
        except sqlite3.DatabaseError as error:  # OperationalError included
            self.connection.close()
            raise SpyreRegressError(
                f"the alert database {self.path} cannot be used ({error}); {RECOVER}") from None

    def _update_to_3(self) -> None:
        """Versions 1 and 2 kept one detected alert per row: each becomes a record."""
        tables = {row[0] for row in self.connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "alerts" not in tables or self.records():
            return
        for row in self.connection.execute(
                "SELECT id, status, document, culprit, stage, report FROM alerts").fetchall():
            alert = alert_from_json(json.loads(row[2]))
            record = lifecycle.AlertRecord(
                id=row[0], kind=alert.kind, good_commit=alert.good_commit,
                bad_commit=alert.bad_commit,
                symptoms=lifecycle.symptoms_of(alert), status=row[1], culprit=row[3],
                note="kept from a schema-2 database")
            self.save([record], {row[0]: {"stage": row[4], "report": row[5]}})

    def records(self) -> list[lifecycle.AlertRecord]:
        """Every stored `lifecycle.AlertRecord`, by id."""

        with self._reading():
            rows = self.connection.execute("SELECT document FROM records ORDER BY id").fetchall()
        return [lifecycle.from_dict(json.loads(document)) for (document,) in rows]

    def extras(self) -> dict[int, dict[str, str | None]]:
        """Per record id: the first divergent stage and the report folder, where known."""
        with self._reading():
            rows = self.connection.execute("SELECT id, stage, report FROM records").fetchall()
        return {row[0]: {"stage": row[1], "report": row[2]} for row in rows}

    def save(self, records: Sequence[lifecycle.AlertRecord],
             extras: dict[int, dict] | None = None) -> None:
        """Store `records` (new or changed) in one transaction, with their extras."""

        extras = extras or {}
        with self._reading(), self.connection:
            for record in records:
                known = self.extras().get(record.id, {})
                extra = {**known, **extras.get(record.id, {})}
                self.connection.execute(
                    "INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (record.id, record.status, record.kind,
                     json.dumps(to_json(lifecycle.to_dict(record))), extra.get("stage"),
                     extra.get("report"), time.time()))

    def environment(self) -> list[environment_records.EnvironmentRecord]:
        """Every stored environment record, by id."""
        return [environment_records.from_dict(json.loads(document)) for (document,) in
                self.connection.execute("SELECT document FROM environment ORDER BY id")]

    def save_environment(self, records: Sequence[environment_records.EnvironmentRecord]
                         ) -> None:
        """Store environment records (new or changed) in one transaction."""
        with self.connection:
            for record in records:
                self.connection.execute(
                    "INSERT OR REPLACE INTO environment VALUES (?, ?, ?)",
                    (record.id, json.dumps(environment_records.to_dict(record)), time.time()))

    def close(self) -> None:
        self.connection.close()
