"""`spyre-regress merge-results`: asv results from many shards or workers in one store."""

from __future__ import annotations

import argparse
from pathlib import Path

from regressions.errors import SpyreRegressError
from spyre_regress.cli import common


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "merge-results", "merge asv results directories into one",
        "Merge the asv results directories of several shards or hosts into one results "
        "directory: the union of their benchmarks, samples of a benchmark measured again "
        "appended. Refused, with nothing written, when two of them describe the same "
        "machine differently or ran different versions of a benchmark (docs/scale-out.md).",
        example="spyre-regress merge-results shard-1/results shard-2/results --into .asv/results")
    p.add_argument("shards", nargs="+", type=Path, metavar="SHARD_DIR",
                   help="asv results directories (each with benchmarks.json)")
    p.add_argument("--into", required=True, type=Path, metavar="RESULTS_DIR",
                   help="the results directory to merge into (created if missing)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from regressions.records import asv_documents
    from regressions.records.results_store import ResultsStore

    for shard in args.shards:
        if not shard.is_dir():
            raise SpyreRegressError(f"{shard} is not a directory; pass asv results "
                                    "directories (`results_dir`, e.g. .asv/results)")
        if shard.resolve() == args.into.resolve():
            raise SpyreRegressError(f"{shard} is the --into directory itself; pass the "
                                    "shards' own directories")
    if args.into.exists() and not args.into.is_dir():
        raise SpyreRegressError(f"--into {args.into} is a file; pass a directory")
    try:
        merged = ResultsStore(args.into).merge([ResultsStore(s).snapshot()
                                                for s in args.shards])
    except asv_documents.MergeRefused as refused:
        raise SpyreRegressError(f"not merged, nothing written: {refused}") from None
    print(f"merged {len(args.shards)} results directories into {args.into}: "
          f"{len(merged.files)} result file(s), machine(s) {', '.join(merged.machines)}")
    return common.EXIT_OK
