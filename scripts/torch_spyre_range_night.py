"""The nightly over torch-spyre's real history: every alert it raised, and its series.

    python scripts/torch_spyre_range_night.py OUT --checkout CHECKOUT [--since 930e9f7]
        [--stride 16] [--samples 10] [--upstream-ids FILE]
    python scripts/torch_spyre_range_night.py OUT --render-only [--upstream-ids FILE]

Clones CHECKOUT into OUT/torch-spyre, writes the suite this tool ships for it
(`spyre-regress suite torch_spyre`) into OUT/bench, and runs the installed `spyre-regress
nightly` over the first-parent history from `--since` (default: torch-spyre #3374, the first
commit that pins torch 2.13; `930e9f7` in the public bundle) on the default grid: the compile
clocks and the modelled device time, every `--stride`-th commit and the newest. Its output,
each line stamped with its second, is OUT/nightly.log.

Then prints (also alone, with `--render-only`, for a night already run): every alert of the
night's alert database with its status, its culprit (this history's id, the upstream id when
`--upstream-ids` maps it - the bundle's `upstream-ids.tsv` - and the PR number of its
subject), kind, pass, workload, the alert's ratio and interval and the investigation's own A/B
at culprit and parent; then the series: total compile time and modelled device time per
workload at every benchmarked commit, and the largest commit-to-commit step of every per-pass
series. The figures of docs/measurements/torch-spyre.md's real-range night.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
from torch_spyre_night import SCRIPT, stamped_run

from regressions import git
from regressions.records import alert_store
from regressions.records.lifecycle import AlertRecord
from regressions.records.results_store import ResultsStore

BENCH = r"bench_compile\.|bench_execute\."  # the compile clocks and the device time
TOTALS = ("bench_compile.CompileTotal.time_compile", "bench_execute.ExecuteDeviceTime.time_device")
PASS_ROWS = "bench_compile.CompileStage.time_stage"
SHOWN = 6  # an alert's series listed one by one (a failure groups every row of a workload)


def night(out: Path, since: str, stride: int, samples: int) -> tuple[int, float]:
    """The installed nightly on OUT/bench: its exit status and wall seconds."""
    command = [str(SCRIPT), "nightly", "--repo", str(out / "bench"), "--stride", str(stride),
               "--bench", BENCH, "--since", since, "--samples", str(samples),
               "--state", str(out / "state"), "--reports", str(out / "reports")]
    return stamped_run(command, out, dict(os.environ))


def upstream_ids(path: Path | None) -> dict[str, str]:
    """This history's commit id -> upstream's, from a TSV with `commit_here` and
    `commit_upstream` columns (the bundle's `upstream-ids.tsv`); empty without one."""
    if path is None:
        return {}
    with path.open(newline="") as handle:
        return {row["commit_here"]: row["commit_upstream"]
                for row in csv.DictReader(handle, delimiter="\t")}


def describe_commit(repo: Path, sha: str, upstream: dict[str, str]) -> str:
    """`here (upstream <id>, #PR)`: both ids and the PR number its subject names."""
    subject = git.commit_info(repo, sha).subject
    pr = re.search(r"\(#(\d+)\)\s*$", subject)
    parts = [f"upstream {upstream[sha][:10]}"] if sha in upstream else []
    parts += [f"#{pr.group(1)}"] if pr else []
    return f"{sha[:10]} ({', '.join(parts)})" if parts else sha[:10]


def interval(ci: tuple[float, float] | None) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"


def describe_alert(record: AlertRecord, stage: str | None, repo: Path,
                   upstream: dict[str, str]) -> list[str]:
    """One alert's lines: what it is, where, the series it groups, the A/B behind it."""
    lines = [f"alert {record.id}: {record.kind}, {record.status}"
             f"{' (provisional)' if record.provisional else ''}; "
             f"between {describe_commit(repo, record.good_commit, upstream)} and "
             f"{describe_commit(repo, record.bad_commit, upstream)}"]
    if record.culprit:
        lines.append(f"  culprit {describe_commit(repo, record.culprit, upstream)}; "
                     f"first divergent pass or stage: {stage or '-'}")
    for symptom in record.symptoms[:SHOWN]:
        ratio = f"x{symptom.ratio:.3f}" if symptom.ratio is not None else "failure"
        lines.append(f"  {symptom.benchmark}{symptom.params}: {ratio} {interval(symptom.ci)}")
    if len(record.symptoms) > SHOWN:
        lines.append(f"  ... and {len(record.symptoms) - SHOWN} more series")
    evidence = record.evidence
    if evidence is not None:
        measured = ("fails where the parent runs" if evidence.failed else
                    f"x{evidence.ratio:.3f} {interval(evidence.ci)}" if evidence.ratio else "-")
        lines.append(f"  A/B {evidence.good_commit[:10]} -> {evidence.bad_commit[:10]}: "
                     f"{measured}, {evidence.samples[0]}+{evidence.samples[1]} samples"
                     + (f", p = {evidence.pvalue:.1e}" if evidence.pvalue is not None else "")
                     + (f"; refuted: {evidence.refuted}" if evidence.refuted else ""))
    if record.note:
        lines.append(f"  note: {record.note}")
    return lines


def alerts(out: Path, upstream: dict[str, str]) -> list[str]:
    """Every alert the night's database holds, reported or not."""
    path = out / "state" / "alerts.sqlite"
    if not path.exists():
        return ["no alert database: the night did not get to detection"]
    store = alert_store.AlertStore(path)
    try:
        records, extras = store.records(), store.extras()
    finally:
        store.close()
    if not records:
        return ["no alert: detection found no regression in the range"]
    return [line for record in records for line in describe_alert(
        record, extras.get(record.id, {}).get("stage"), out / "torch-spyre", upstream)]


def point(params: str) -> str:
    """`('mlp', 128)` as `mlp 128`."""
    return " ".join(part.strip(" '") for part in params.strip("()").split(",") if part.strip())


def totals_table(frame: pd.DataFrame, benchmark: str) -> str:
    """One benchmark's value per commit (rows, history order) and point (columns), in ms or
    us (asv stores seconds); a point that failed at a commit is blank."""
    rows = frame[(frame.benchmark == benchmark) & (frame.status == "ok")]
    scale, unit = (1e3, "ms") if "compile" in benchmark else (1e6, "us")
    table = rows.pivot_table(index=["position", "commit"], columns="params", values="value")
    table.index = pd.Index([commit[:10] for _, commit in table.index], name="commit")
    table.columns = [point(params) for params in table.columns]
    return f"{benchmark} ({unit})\n{(table * scale).round(1).to_string(na_rep='')}"


def largest_steps(frame: pd.DataFrame, count: int = 15) -> str:
    """The largest ratio between consecutive benchmarked commits of every per-pass series."""
    rows = frame[(frame.benchmark == PASS_ROWS) & (frame.status == "ok")].sort_values("position")
    steps = []
    for params, series in rows.groupby("params"):
        values, commits = series.value.to_numpy(), series.commit.to_list()
        for i in range(1, len(values)):
            if values[i - 1] > 0:
                steps.append((values[i] / values[i - 1], params, commits[i - 1][:10],
                              commits[i][:10]))
    steps.sort(reverse=True)
    lines = [f"x{ratio:.2f} {point(params)} {good} -> {bad}" for ratio, params, good, bad in
             steps[:count]]
    return f"largest per-pass steps ({len(steps)} in all, both directions):\n" + "\n".join(lines)


def series(out: Path) -> list[str]:
    """The night's series, as the tables above describe."""
    frame = ResultsStore(out / "bench" / ".asv" / "results", repo=out / "torch-spyre").frame()
    return [*(totals_table(frame, benchmark) for benchmark in TOTALS), largest_steps(frame)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the night's directory")
    parser.add_argument("--checkout", type=Path,
                        help="a torch-spyre checkout whose history reaches --since")
    parser.add_argument("--since", default="930e9f7",
                        help="the oldest commit (default 930e9f7, #3374 in the bundle)")
    parser.add_argument("--stride", type=int, default=16)
    parser.add_argument("--samples", type=int, default=10,
                        help="samples a side behind each confirmation")
    parser.add_argument("--upstream-ids", type=Path,
                        help="TSV mapping commit_here to commit_upstream (the bundle's)")
    parser.add_argument("--render-only", action="store_true",
                        help="print what OUT's night found, without running one")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if not args.render_only:
        if args.checkout is None:
            parser.error("--checkout is required unless --render-only is given")
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--quiet", "--no-local", str(args.checkout),
                        str(out / "torch-spyre")], check=True)
        subprocess.run([str(SCRIPT), "suite", "torch_spyre", "--repo", str(out / "torch-spyre"),
                        "--out", str(out / "bench")], cwd=out, check=True)
        status, seconds = night(out, args.since, args.stride, args.samples)
        print(f"nightly exit {status}, {seconds:.0f} s; load {os.getloadavg()[0]:.2f} at its "
              f"end; its output: {out / 'nightly.log'}")
    elif not (out / "torch-spyre").is_dir():
        parser.error(f"{out} holds no night: run without --render-only first")
    upstream = upstream_ids(args.upstream_ids)
    print("\n".join(alerts(out, upstream)))
    print()
    print("\n\n".join(series(out)))


if __name__ == "__main__":
    main()
