"""`spyre-regress benchmark`: the nightly's benchmark step alone, for one shard of the suite."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from regressions import git
from spyre_regress.cli import common


def shard(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)/(\d+)", text)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shard; give I/N with 1 <= I <= "
                                         "N, e.g. 2/3")
    return int(match.group(1)), int(match.group(2))


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "benchmark", "run asv on the night's commits for one shard of the suite",
        "asv on the branch's commits (every --stride-th and the newest), as the nightly "
        "runs it, for shard I of N of the suite's benchmarks (docs/scale-out.md): N jobs of "
        "a CI matrix each run one, `spyre-regress merge-results` joins their results, and "
        "the nightly then detects on them.",
        example="spyre-regress benchmark --repo . --stride 3 --shard 1/3")
    p.add_argument("--repo", required=True, type=Path, metavar="PATH",
                   help="the repository under test (a git checkout with asv.conf.json)")
    p.add_argument("--branch", default="main", help="the branch whose history is measured")
    p.add_argument("--stride", type=common.positive_int, default=1, metavar="N",
                   help="benchmark every N-th commit and the newest (default %(default)s)")
    p.add_argument("--since", type=common.ref, metavar="REV",
                   help="the oldest commit to benchmark (default: the branch's first)")
    p.add_argument("--bench", type=common.regex, metavar="REGEX",
                   help="only benchmarks asv's --bench selects")
    p.add_argument("--shard", required=True, type=shard, metavar="I/N",
                   help="run the I-th of N shards of the suite")
    p.add_argument("--machine", default="nightly", help="asv machine name")
    p.add_argument("--state", type=Path, metavar="DIR",
                   help="scratch space (default REPO/.spyre-regress)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from regressions.probing import suite
    from regressions.records.results_store import ResultsStore
    from spyre_regress import nightly, scaleout

    git.check_repository(suite.history_repo(args.repo))
    repo = args.repo.resolve()
    state = (args.state or repo / ".spyre-regress").resolve()
    options = nightly.NightlyOptions(repo=repo, state_dir=state, reports_dir=state / "reports",
                                     branch=args.branch, stride=args.stride,
                                     bench=None, machine=args.machine)
    history = nightly.branch_history(suite.history_repo(repo), args.branch, args.since)
    commits = nightly.select_commits(history, args.stride)
    listed = suite.discover(repo, state / "work")
    names = [b.name for b in listed.values() if scaleout.selected(b, args.bench)]
    index, count = args.shard
    chosen = scaleout.shard_of(names, index, count,
                               ResultsStore(options.results_dir).mean_seconds())
    common.progress(f"shard {index}/{count}: {len(chosen)} of {len(names)} benchmarks on "
                    f"{len(commits)} commits")
    if chosen:
        options.bench = scaleout.selection(chosen, args.bench)
        state.mkdir(parents=True, exist_ok=True)
        nightly.benchmark(options, commits, common.progress)
    print(f"shard {index}/{count}: {', '.join(chosen) or 'no benchmarks'}; results in "
          f"{options.results_dir}")
    return common.EXIT_OK
