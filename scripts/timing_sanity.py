"""The timing model away from matmul, and its noise: the figures beside its calibration.

    python scripts/timing_sanity.py [--draws N] [--shape ROWS COLS]

Compiles gelu, exp and neg alone on a [1024, 4096] float16 input through `spyre_sim.compile`
with `Config(numerics=False, noise_cv=0)`, at 32 cores and at 1, and prints each kernel's
modelled time (its execution alone, without the launch gap) and what bounds it; then draws
the run noise factor (`timeline.noise_factor`, the default CV) N times from
`random.Random(0)` and prints its mean and coefficient of variation. Nothing is timed on the
host: the figures are the model's, the same on every run (docs/measurements/timing-model.md).
"""

from __future__ import annotations

import argparse
import random
import statistics
import warnings

import torch

import spyre_sim
from spyre_sim.timeline import noise_factor

OPS = {"gelu": torch.nn.functional.gelu, "exp": torch.exp, "neg": torch.neg}


def kernel_times(shape: tuple[int, int], cores: int) -> dict[str, tuple[float, str]]:
    """Each op's one kernel: modelled time in us and its bound, noise and numerics off."""
    x = torch.randn(*shape, dtype=torch.float16)
    config = spyre_sim.Config(numerics=False, noise_cv=0, cores=cores)
    times = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fp16 inputs become DLFloat16: said once per process
        for name, op in OPS.items():
            (kernel,) = spyre_sim.compile(op, (x,), config).run(x).kernels
            times[name] = (kernel.time_us, kernel.bound)
    return times


def noise(draws: int, cv: float) -> tuple[float, float]:
    """Mean and coefficient of variation of `draws` noise factors from Random(0)."""
    rng = random.Random(0)
    values = [noise_factor(rng, cv) for _ in range(draws)]
    mean = statistics.fmean(values)
    return mean, statistics.pstdev(values) / mean


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--shape", type=int, nargs=2, default=(1024, 4096),
                        metavar=("ROWS", "COLS"))
    args = parser.parse_args(argv)
    for cores in (32, 1):
        times = kernel_times(tuple(args.shape), cores)
        print(f"{cores:>2} cores: " + ", ".join(
            f"{name} {us:.1f} us ({bound})" for name, (us, bound) in times.items()))
    cv = spyre_sim.Config().noise_cv
    mean, spread = noise(args.draws, cv)
    print(f"{args.draws} noise factors at CV {cv}: mean {mean:.5f}, CV {spread:.5f}")


if __name__ == "__main__":
    main()
