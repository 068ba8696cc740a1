"""`spyre-regress merge-results` as a user runs it: two shards of one run joined into the store
the unsharded run wrote, and a mismatch refused with nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import run_cli

from regressions.records import results

FIXTURE = Path(__file__).parent / "fixtures" / "asv_results"


def shards(tmp_path: Path) -> tuple[Path, Path]:
    """The fixture store cut in two by benchmark, as two CI jobs would have written it."""
    parts = []
    for name, keep in (("one", lambda n: "execute" in n), ("two", lambda n: "execute" not in n)):
        part = tmp_path / name
        shutil.copytree(FIXTURE, part)
        for path in part.glob("*/*.json"):
            if path.name != "machine.json":
                document = json.loads(path.read_text())
                document["results"] = {n: r for n, r in document["results"].items() if keep(n)}
                path.write_text(json.dumps(document))
        parts.append(part)
    return parts[0], parts[1]


def test_two_shards_merge_into_the_unsharded_store(tmp_path, outside):
    one, two = shards(tmp_path)
    into = tmp_path / "store"
    done = run_cli("merge-results", str(one), str(two), "--into", str(into), cwd=outside)
    assert done.returncode == 0, done.stderr
    assert "machine(s) fixture" in done.stdout
    expected = results.load_results(FIXTURE).sort_values(["benchmark", "params", "commit"])
    got = results.load_results(into).sort_values(["benchmark", "params", "commit"])
    assert got["samples"].tolist() == expected["samples"].tolist()
    assert got["status"].tolist() == expected["status"].tolist() and len(got) > 0


def test_a_shard_of_another_machine_is_refused_and_nothing_written(tmp_path, outside):
    one, two = shards(tmp_path)
    first = next(p for p in two.glob("*/*.json") if p.name != "machine.json")
    document = json.loads(first.read_text())
    document["params"]["cpu"] = "another CPU"
    first.write_text(json.dumps(document))
    into = tmp_path / "store"
    done = run_cli("merge-results", str(one), str(two), "--into", str(into), cwd=outside)
    assert done.returncode == 2
    assert "nothing written" in done.stderr and "params.cpu" in done.stderr
    assert first.name in done.stderr
    assert not into.exists()
