"""`spyre-regress`: the command line. The only module that prints for the user and exits.

Exit codes: 0 success / nothing regressed, 1 regressions found, 2 usage or input error.
"""

from __future__ import annotations

import argparse
import sys

from regressions.errors import SpyreRegressError

EXIT_OK, EXIT_REGRESSED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spyre-regress",
        description="Regression benchmarking for the Spyre torch.compile backend.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    del sub  # subcommands are registered below as they land
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except SpyreRegressError as exc:
        print(f"spyre-regress: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("spyre-regress: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
