"""regressions/records/files.py: atomic writes leave the old file or the new one, and never
their temporary file; a directory in the way is named, not a temporary path."""

from __future__ import annotations

import os

import pytest

from regressions.errors import SpyreRegressError
from regressions.records import files


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    files.write_json(target, {"version": 1, "n": 1})

    def refused(source, destination):
        raise PermissionError(13, "Permission denied", str(destination))

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(PermissionError):
        files.write_json(target, {"version": 1, "n": 2})
    assert files.read_json(target, "test") == {"n": 1, "version": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def interrupted(source, destination):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        files.write_text(tmp_path / "x.txt", "text")
    assert list(tmp_path.iterdir()) == []


def test_a_directory_in_the_way_is_named(tmp_path):
    (tmp_path / "repro.py").mkdir()
    with pytest.raises(SpyreRegressError, match=r"repro.py is a directory; pass a file path"):
        files.write_text(tmp_path / "repro.py", "print()\n")
    assert [p.name for p in tmp_path.iterdir()] == ["repro.py"]
