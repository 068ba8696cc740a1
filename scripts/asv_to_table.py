"""An asv results store written out as a long table of results (CSV or Parquet), the layout
`spyre-regress detect --table` reads without a mapping (docs/detection.md, "Tables of
results"; `regressions.records.tables.long_table`). Read back with `--table`, the store gives
the alerts it gives with `--results`.

    python scripts/asv_to_table.py --results STORE/results [--machine NAME] --out FILE.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

from regressions.records import tables
from regressions.records.results_store import ResultsStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--machine")
    parser.add_argument("--out", type=Path, required=True, help="FILE.csv or FILE.parquet")
    args = parser.parse_args()
    kind = tables.FORMATS.get(args.out.suffix.lower())
    if kind is None:
        parser.error("--out must end in .csv or .parquet")
    table = tables.long_table(ResultsStore(args.results, args.machine).frame(),
                              lists=kind == "Parquet")
    if kind == "Parquet":
        table.to_parquet(args.out, index=False)
    else:
        table.to_csv(args.out, index=False)
    print(f"wrote {len(table)} rows, {table['commit'].nunique()} commits to {args.out}")


if __name__ == "__main__":
    main()
