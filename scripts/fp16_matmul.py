"""fp16 against fp32 `torch.mm` on this CPU: why spyre_sim computes in fp32 and rounds to fp16.

    python scripts/fp16_matmul.py [--rounds N]

Times [127, 4096] x [4096, 4096]^T (the MLP block's matmul at seq 127) in both dtypes,
interleaved so load on a shared machine hits both alike; prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    torch.manual_seed(0)
    a, w = torch.randn(127, 4096), torch.randn(4096, 4096)
    operands = {"fp32": (a, w), "fp16": (a.half(), w.half())}
    times: dict[str, list[float]] = {name: [] for name in operands}
    for _ in range(rounds):
        for name, (x, y) in operands.items():
            start = time.perf_counter()
            torch.mm(x, y.t())
            times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) * 1e3 for name, values in times.items()}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {rounds} rounds: "
          f"fp32 {medians['fp32']:.1f} ms, fp16 {medians['fp16']:.1f} ms (medians); "
          f"fp16 / fp32 = {medians['fp16'] / medians['fp32']:.1f}")


if __name__ == "__main__":
    main()
