import json
import logging
import math
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from regressions import git
from regressions.errors import SpyreRegressError
from regressions.groundtruth import synthetic
from regressions.records import results
from regressions.records.results_store import ResultsStore

FIXTURE = Path(__file__).parent / "fixtures" / "asv_results"
FIXTURE_COMMITS = json.loads((Path(__file__).parent / "fixtures" / "asv_fixture.json").read_text())


def sha(subject: str) -> str:
    return next(c["sha"] for c in FIXTURE_COMMITS["commits"] if c["subject"] == subject)


def write(root: Path, docs: dict[str, dict]) -> Path:
    for path, doc in docs.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(json.dumps(doc))
    return root


def track(values, name="bench_numerics.track_error"):
    return {name: synthetic.BenchmarkHistory(samples=[[[v]] for v in values], type="track",
                                             unit="rel error")}


def make_repo(tmp_path: Path, dates: list[str]) -> tuple[Path, list[str]]:
    """A scratch repo on branch main, one commit per date (author and committer)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "HOME": str(tmp_path), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, env=env, check=True)
    shas = []
    for i, date in enumerate(dates):
        (repo / "file").write_text(f"{i}\n")
        subprocess.run(["git", "add", "file"], cwd=repo, env=env, check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"commit {i}"], cwd=repo, check=True,
                       env={**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        shas.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, env=env, check=True,
                                   capture_output=True, text=True).stdout.strip())
    return repo, shas


def epoch_ms(date: str) -> int:
    return int(datetime.fromisoformat(date).timestamp() * 1000)


# --- the real asv run ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def fixture_frame():
    return results.load_results(FIXTURE)


def test_fixture_rows_and_order(fixture_frame):
    frame = fixture_frame
    order = [c["sha"] for c in FIXTURE_COMMITS["commits"]]
    positions = frame.drop_duplicates("commit").set_index("commit")["position"]
    assert sorted(positions.items(), key=lambda kv: kv[1]) == [(s, i) for i, s in enumerate(order)]
    assert set(frame["machine"]) == {"fixture"}
    assert set(frame["params"][frame["benchmark"] == "bench_execute.Work.time_work"]) == {
        "(16, 'add')", "(16, 'mul')", "(64, 'add')", "(64, 'mul')"}
    assert len(frame) == 8 * (4 + 1 + 1 + 1 + 1)


def test_fixture_statuses(fixture_frame):
    frame = fixture_frame.set_index(["benchmark", "params", "commit"])
    skipped = frame.loc[("bench_execute.Work.time_work", "(64, 'mul')"), "status"]
    assert set(skipped) == {"skipped"}
    feature = frame.loc[("bench_execute.Feature.time_feature", "")]
    assert feature.loc[sha("toy: first version"), "status"] == "skipped"
    assert feature.loc[sha("toy: add the feature"), "status"] == "ok"
    flaky = frame.loc[("bench_execute.time_flaky", "")]
    assert [c for c, s in flaky["status"].items() if s == "failed"] == [sha("toy: break flaky")]
    assert math.isnan(flaky.loc[sha("toy: break flaky"), "value"])


def test_fixture_samples_units_and_direction(fixture_frame):
    ok = fixture_frame[fixture_frame["status"] == "ok"]
    timed = ok[ok["type"] == "time"]
    assert (timed["samples"].map(len) == 10).all()  # rounds=2 x repeat=5, --record-samples
    assert (timed["unit"] == "seconds").all()
    assert (timed["ci_99_a"] <= timed["value"]).all() and (timed["value"] <= timed["ci_99_b"]).all()
    tracks = ok[ok["type"] == "track"].set_index("benchmark")
    assert tracks["samples"].isna().all()
    assert set(tracks["unit"]) == {"items/s", "rel error"}
    # Declared on the function, kept by asv_runner in benchmarks.json.
    assert tracks.loc["bench_execute.track_items_per_second", "higher_is_better"].all()
    assert not tracks.loc["bench_numerics.track_rel_error", "higher_is_better"].any()


def test_fixture_series(fixture_frame):
    series = {s.name: s for s in results.series_from_frame(fixture_frame)}
    assert len(series) == 7  # (64, 'mul') is skipped everywhere: no series
    flaky = series["bench_execute.time_flaky"]
    assert [i for i, s in enumerate(flaky.samples) if s is None] == [5]
    assert len(series["bench_execute.Feature.time_feature"].samples) == 7  # skipped once
    assert series["bench_numerics.track_rel_error"].samples[0] == (0.001,)
    assert series["bench_execute.track_items_per_second"].higher_is_better
    assert not series["bench_execute.Work.time_work(16, 'add')"].higher_is_better


def test_higher_is_better_patterns(fixture_frame):
    series = results.series_from_frame(fixture_frame, higher_is_better=[r"track_rel_error"])
    assert {s.name for s in series if s.higher_is_better} == {
        "bench_execute.track_items_per_second", "bench_numerics.track_rel_error"}


# --- damaged and unusual files -------------------------------------------------------------

def test_corrupt_partial_and_wrong_version_files_are_skipped(tmp_path, caplog):
    commits = [(f"{i + 1:08x}" * 5, 1_700_000_000_000 + i) for i in range(3)]
    root = write(tmp_path / "results", synthetic.asv_results_documents(commits, track([1, 1, 2])))
    machine = root / "synthetic"
    (machine / "bad1-env.json").write_text("{not json")
    (machine / "bad2-env.json").write_bytes(b"\xff\xfe\x00")
    (machine / "bad3-env.json").write_text(json.dumps({"version": 1, "results": {}}))
    (machine / "bad4-env.json").write_text(json.dumps({"version": 2, "commit_hash": "ab"}))
    (machine / "bad5-env.json").write_text(json.dumps([1, 2]))
    truncated = (machine / f"{commits[0][0][:8]}-virtualenv-py3.11.json").read_text()
    (machine / "bad6-env.json").write_text(truncated[: len(truncated) // 2])
    with caplog.at_level(logging.INFO, logger="regressions"):
        frame = results.load_results(root)
    assert len(frame) == 3 and list(frame["value"]) == [1.0, 1.0, 2.0]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("skipped 6 of 9 result file(s) (e.g. ") and "bad1" in warning
    for name in ("bad1", "bad2", "bad3", "bad4", "bad5", "bad6"):
        assert any(f"{name}-env.json" in r.getMessage() for r in caplog.records
                   if r.levelno == logging.INFO), name


def test_malformed_row_is_skipped_not_the_file(tmp_path, caplog):
    commits = [(f"{i + 1:08x}" * 5, 1_700_000_000_000 + i) for i in range(2)]
    docs = synthetic.asv_results_documents(commits, {
        **track([1, 2]), **track([3, 4], name="bench_numerics.track_other")})
    path = f"synthetic/{commits[0][0][:8]}-virtualenv-py3.11.json"
    docs[path]["results"]["bench_numerics.track_other"][0] = [1.0, 2.0]  # 2 values, 1 combo
    with caplog.at_level(logging.INFO, logger="regressions"):
        frame = results.load_results(write(tmp_path / "r", docs))
    assert len(frame) == 3
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("skipped 1 malformed row(s) (e.g. ")
    assert any("bench_numerics.track_other" in r.getMessage() and path.split("/")[1]
               in r.getMessage() for r in caplog.records)


def test_failed_skipped_and_missing_samples(tmp_path):
    commits = [(f"{i + 1:08x}" * 5, 1_700_000_000_000 + i) for i in range(3)]
    history = synthetic.BenchmarkHistory(
        samples=[[[1.0, 1.1], None], [[], [2.0, 2.2]], [[1.2, 1.0], [2.1, 2.0]]],
        params=(("'a'", "'b'"),), record_samples=False)
    frame = results.load_results(write(tmp_path / "r", synthetic.asv_results_documents(
        commits, {"bench_execute.K.time_k": history})))
    rows = {(r.params, r.position): r for r in frame.itertuples()}
    assert rows["('a')", 0].status == "ok" and rows["('a')", 0].samples is None
    assert rows["('a')", 1].status == "skipped"
    assert rows["('b')", 0].status == "failed"
    (a, b) = results.series_from_frame(frame)
    assert a.samples == ((1.05,), (1.1,)) and a.deterministic is False  # CI from min/max
    assert b.samples == (None, (2.1,), (2.05,))


def test_missing_directory_machine_and_results(tmp_path):
    with pytest.raises(SpyreRegressError, match="does not exist"):
        results.load_results(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpyreRegressError, match="no asv results"):
        results.load_results(tmp_path / "empty")
    with pytest.raises(SpyreRegressError, match="machines found: fixture"):
        results.load_results(FIXTURE, machine="ci")
    assert set(results.load_results(FIXTURE, machine="fixture")["machine"]) == {"fixture"}


# --- history order from git ----------------------------------------------------------------

DATES = ["2026-03-04T00:00:00+00:00", "2026-03-01T00:00:00+00:00",
         "2026-03-03T00:00:00+00:00", "2026-03-02T00:00:00+00:00"]


def test_git_order_beats_out_of_order_commit_dates(tmp_path):
    repo, shas = make_repo(tmp_path, DATES)
    # Results dated as asv dates them (author date); the value steps at the third commit.
    docs: dict[str, dict] = {}
    for i, (commit, date) in enumerate(zip(shas, DATES, strict=True)):
        docs |= {path: doc for path, doc in synthetic.asv_results_documents(
            [(commit, epoch_ms(date))], track([1.0 if i < 2 else 2.0])).items()}
    root = write(tmp_path / "results", docs)
    by_date = results.load_results(root).sort_values("position")
    assert list(by_date["commit"]) == [shas[1], shas[3], shas[2], shas[0]]
    by_git = results.load_results(root, repo=repo).sort_values("position")
    assert list(by_git["commit"]) == shas
    assert list(by_git["position"]) == [0, 1, 2, 3]


def test_results_off_the_first_parent_chain_are_dropped(tmp_path, caplog):
    repo, shas = make_repo(tmp_path, DATES[:2])
    docs = synthetic.asv_results_documents([(shas[0], 1), (shas[1], 2), ("f" * 40, 3)],
                                           track([1.0, 1.0, 5.0]))
    root = write(tmp_path / "results", docs)
    with caplog.at_level(logging.WARNING, logger="regressions"):
        frame = results.load_results(root, repo=repo)
    assert list(frame["commit"]) == shas
    assert any("ffffffff" in r.getMessage() for r in caplog.records)
    only_stray = write(tmp_path / "stray", synthetic.asv_results_documents(
        [("e" * 40, 1)], track([1.0])))
    with pytest.raises(SpyreRegressError, match="first-parent history"):
        results.load_results(only_stray, repo=repo)


def test_git_helpers(tmp_path):
    repo, shas = make_repo(tmp_path, DATES)
    assert git.resolve(repo, "HEAD") == shas[-1]
    assert git.resolve(repo, "main~2") == shas[1]
    assert git.first_parent_history(repo) == shas
    assert git.first_parent_history(repo, "main", base=shas[1]) == shas[2:]
    info = git.commit_info(repo, shas[1])
    assert (info.sha, info.subject) == (shas[1], "commit 1")
    assert info.date == datetime(2026, 3, 1, tzinfo=UTC)
    tree = git.export_tree(repo, shas[1], tmp_path / "tree" / "c1")
    assert sorted(p.name for p in tree.iterdir()) == ["file"]  # no .git
    assert (tree / "file").read_text() == "1\n"


@pytest.mark.parametrize("ref", ["", "-x", "--output=x", "main\nHEAD", "a\0b"])
def test_git_refuses_option_like_refs(tmp_path, ref):
    with pytest.raises(SpyreRegressError, match="invalid git ref"):
        git.resolve(tmp_path, ref)


def test_git_errors_name_the_problem(tmp_path):
    repo, _ = make_repo(tmp_path, DATES[:1])
    with pytest.raises(SpyreRegressError, match="'nope'.*ref exists"):
        git.resolve(repo, "nope")
    with pytest.raises(SpyreRegressError, match="not a directory"):
        git.first_parent_history(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(SpyreRegressError, match="git says"):
        git.first_parent_history(tmp_path / "plain")


def test_recorded_costs_price_a_sample_a_run_and_a_setup_cache(tmp_path):
    """Re-measurement's prices come from the durations asv wrote: per benchmark its duration
    over the samples that run took, `<build>` per run, `<setup_cache KEY>` per benchmark
    that shares the key."""
    from regressions.records import asv_documents, files

    timed, counted = "bench_execute.ExecuteHostTime.time_host", "bench_work.W.track_work"
    files.write_json(tmp_path / "benchmarks.json", {
        "version": 2,
        timed: {"name": timed, "type": "time", "version": "1", "params": [["'a'", "'b'"]],
                "param_names": ["w"], "unit": "seconds"},
        counted: {"name": counted, "type": "track", "version": "1", "params": [["'a'"]],
                  "param_names": ["w"], "unit": "unit", "setup_cache_key": "bench_work:10"}})
    for number, (duration, build) in enumerate([(8.0, 30.0), (12.0, 50.0), (10.0, 40.0)]):
        document = asv_documents.new_document(f"{number:x}" * 40, "env", 0, "m")
        row = asv_documents.new_row([["'a'", "'b'"]], "1")
        for index in (0, 1):
            asv_documents.set_result(row, index, [1e-3] * 20)
        row[asv_documents.RESULT_COLUMNS.index("duration")] = duration
        track = asv_documents.new_row([["'a'"]], "1")
        asv_documents.set_result(track, 0, [5.0], timed=False)
        track[asv_documents.RESULT_COLUMNS.index("duration")] = 2.0
        document["results"] = {timed: row, counted: track}
        document["durations"] = {"<build>": build, "<setup_cache bench_work:10>": 90.0 + number}
        files.write_json(asv_documents.result_path(tmp_path, "m", f"{number:x}" * 40, "env"),
                         document)
    costs = ResultsStore(tmp_path, "m").costs()
    assert costs.sample(timed) == 10.0 / 40  # the median run: 10 s for 2 x 20 samples
    assert costs.sample(counted) == 2.0
    assert costs.per_run == 40.0
    assert costs.setup_cache == {counted: ("bench_work:10", 91.0)}
    assert ResultsStore(tmp_path, "elsewhere").costs().per_run == 0.0
