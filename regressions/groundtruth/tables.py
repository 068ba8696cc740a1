"""Synthetic tables of results with known answers, for `detect --table` (records/tables.py).

Two shapes. `ingest_rows`: wide rows shaped like the ones torch-spyre's CI writes for its
nightly performance runs (its `.github/scripts/ingest_xml.py`: one `perf_benchmarks` row per
operation and shape, a column per figure, with the run's `platform`, `workflow`,
`version_info` and `created_at`, and no commit), read through
`examples/tables/torch_spyre_perf.json`. `long_rows`: the long layout, N series x M commits,
a seeded share of them with one step, for the time and memory budget of reading a large
table (scripts/bench_table.py). Only the column names and layout follow torch-spyre; every
number is generated here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

# (operation, input shapes): the op rows of an ingest table; one Granite model row besides.
OPS = (("add", "1x4096"), ("matmul", "128x4096x4096"), ("softmax", "32x2048"))
MODEL = ("granite", "bs1_pl128", "full_model", 1, 128, "prefill")
# Per metric column: level in ms (MB for mem_size_mb) and noise (log-normal sd) per run.
METRICS = {"compile_ms": (850.0, 0.03), "spyre_ms": (2.4, 0.01), "kernel_mean_ms": (1.9, 0.01),
           "cpu_ms": (3.1, 0.02), "mem_size_mb": (64.0, 0.0)}
# The figure columns the ingest rows have that these runs leave empty (a suite that does not
# report them), as an export of the table has them.
EMPTY = ("total_duration_ms", "memory_transfer_mean_ms", "runtime_ms", "pt_util_percent",
         "torch_spyre_ms", "ratio")
NOISE_SEED = 7


@dataclass(frozen=True)
class Step:
    """A planted change: `column` of `operation` multiplied by `factor` from run `run` on."""

    operation: str
    column: str
    run: int
    factor: float


def ingest_rows(runs: int, step: Step | None = None, *, seed: int = NOISE_SEED,
                start: str = "2026-04-01T03:00:00Z") -> pd.DataFrame:
    """One nightly run a day for `runs` days: each op row and the model row, with `step`
    planted. Dates are written as ClickHouse exports DateTime ("2026-04-01 03:00:00")."""
    rng = np.random.default_rng(seed)
    dates = pd.date_range(start, periods=runs, freq="D")
    rows = []
    for run, date in enumerate(dates):
        shared = {"version_info": f"torch_spyre 0.{run // 7}.0", "workflow": "perf-nightly",
                  "platform": "x86_64", "created_at": date.strftime("%Y-%m-%d %H:%M:%S")}
        kinds: list[tuple[str, str, str | None, str | None, int | None, int | None, str]] = [
            ("op", op, None, shapes, None, None, "op_benchmark") for op, shapes in OPS]
        kinds.append(("model", MODEL[0], MODEL[1] + "_" + MODEL[2], None, MODEL[3], MODEL[4],
                      MODEL[5]))
        for record, operation, config, shapes, batch, prompt, mode in kinds:
            row = {**shared, "record_type": record, "operation_name": operation,
                   "config_name": config, "input_shapes": shapes, "batch_size": batch,
                   "prompt_length": prompt, "run_mode": mode, "num_runs": 20,
                   **dict.fromkeys(EMPTY)}
            for column, (level, noise) in METRICS.items():
                factor = step.factor if step and step.operation == operation and \
                    step.column == column and run >= step.run else 1.0
                row[column] = round(level * factor * float(np.exp(rng.normal(0, noise))), 4)
            rows.append(row)
    return pd.DataFrame(rows)


def long_rows(series: int, commits: int, *, share: float, seed: int, noise: float = 0.03,
              factor: float = 1.10) -> tuple[pd.DataFrame, dict[str, int]]:
    """`series` x `commits` points in the long layout (one value per point, log-normal noise
    `noise`), and the planted steps: benchmark -> the commit index its x`factor` starts at,
    for a `share` of the series chosen with `seed`, each at a commit drawn away from the
    ends."""
    rng = np.random.default_rng(seed)
    names = [f"suite.Bench{i:04d}.time_run" for i in range(series)]
    planted = {names[i]: int(rng.integers(commits // 10, commits - commits // 10))
               for i in sorted(rng.choice(series, int(round(share * series)), replace=False))}
    hashes = [f"{rng.integers(0, 2**63):016x}{i:024x}" for i in range(commits)]
    levels = np.exp(rng.normal(0, noise, (series, commits))) * rng.uniform(0.001, 1, (series, 1))
    for name, at in planted.items():
        levels[names.index(name), at:] *= factor
    dates = pd.date_range("2026-01-01", periods=commits, freq="h").strftime("%Y-%m-%dT%H:%M:%SZ")
    table = pd.DataFrame({
        "machine": "runner", "env": "py3.11",
        "benchmark": np.repeat(names, commits), "commit": np.tile(hashes, series),
        "date": np.tile(dates, series), "value": levels.ravel(), "unit": "seconds"})
    return table, planted
