"""asv result documents (results format version 2), written by one function.

asv's own runs write these files; the tool writes them too, for bisection measurements (their
own store) and for the synthetic stores of the ground truth, through `record_measurement`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

from regressions.records.files import write_json, write_text

RESULT_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
                  "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
                  "samples", "profile"]  # asv results format version 2 (asv docs, dev.rst)


def _stats(samples: Sequence[float]) -> tuple[float, float, float, float, float]:
    ordered = sorted(samples)

    def quantile(q: float) -> float:
        position = q * (len(ordered) - 1)
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    return quantile(0.5), quantile(0.005), quantile(0.995), quantile(0.25), quantile(0.75)


def record_measurement(results_dir: Path, machine: str, env_name: str, commit: str,
                       commit_date_ms: int, benchmark: str, param_index: int, combos: int,
                       params: Sequence[Sequence[str]], samples: Sequence[float],
                       deterministic: bool, benchmark_version: str | None) -> Path:
    """Merge one measurement into `results/<machine>/<commit8>-<env>.json` (asv format 2).

    Combinations not measured stay NaN (asv's "skipped"), so readers see exactly what ran.
    """
    path = Path(results_dir) / machine / f"{commit[:8]}-{env_name}.json"
    document = json.loads(path.read_text()) if path.exists() else {
        "commit_hash": commit, "env_name": env_name, "date": commit_date_ms,
        "params": {"machine": machine}, "python": "", "requirements": {}, "env_vars": {},
        "result_columns": RESULT_COLUMNS, "results": {}, "durations": {}, "version": 2}
    row = document["results"].get(benchmark)
    nan = float("nan")
    if row is None:
        row = [[nan] * combos, [list(p) for p in params], benchmark_version, None, None] + \
              [[nan] * combos for _ in range(6)] + [[None] * combos, None]
    median, low, high, q25, q75 = _stats(samples)
    row[0][param_index] = median
    row[3] = int(time.time() * 1000)
    for column, value in (("stats_ci_99_a", low), ("stats_ci_99_b", high), ("stats_q_25", q25),
                          ("stats_q_75", q75), ("stats_number", 1),
                          ("stats_repeat", len(samples))):
        row[RESULT_COLUMNS.index(column)][param_index] = value
    if not deterministic:
        previous = row[RESULT_COLUMNS.index("samples")][param_index] or []
        row[RESULT_COLUMNS.index("samples")][param_index] = list(previous) + list(samples)
    document["results"][benchmark] = row
    write_text(path, json.dumps(document, allow_nan=True) + "\n")
    machine_file = Path(results_dir) / machine / "machine.json"
    if not machine_file.exists():
        write_json(machine_file, {"machine": machine, "version": 1})
    return path
