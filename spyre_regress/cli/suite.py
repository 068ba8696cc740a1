"""`spyre-regress suite`: a shipped benchmark suite written out for an external checkout."""

from __future__ import annotations

import argparse
from pathlib import Path

from spyre_regress.cli import common


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "suite", "write a shipped benchmark suite out for your checkout",
        "Write the benchmark suite NAME that this tool ships for a project without one of "
        "its own (torch_spyre: torch-spyre's compiler front half on a CPU) into DIR, its "
        "asv.conf.json naming your checkout, as django-asv measures django. Then run asv "
        "there, or any command with --repo DIR (docs/torch-spyre.md). Writing again replaces "
        "the benchmarks and keeps asv's results.",
        example="spyre-regress suite torch_spyre --repo ~/torch-spyre --out ~/torch-spyre-bench")
    p.add_argument("name", metavar="NAME", help="the shipped suite (torch_spyre)")
    p.add_argument("--repo", required=True, type=Path, metavar="PATH",
                   help="your git checkout of the project the suite measures")
    p.add_argument("--out", required=True, type=Path, metavar="DIR",
                   help="where to write the suite (created if missing)")
    p.add_argument("--branch", default="main", metavar="NAME",
                   help="the branch whose history the nightly walks (default: main)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from spyre_regress import suites

    written = suites.write(args.name, args.repo, args.out, args.branch)
    print(f"wrote the {args.name} suite for {args.repo.resolve()} ({args.branch}) into "
          f"{written}; next: cd {written} && asv machine --yes && asv run {args.branch}^!")
    return common.EXIT_OK
