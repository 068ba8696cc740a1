"""Calibration: the measured Spyre matmuls, predicted through the real compile pipeline.

    python -m spyre_sim.calibrate                      # the five targets; exit 1 if any > 15 %
    python -m spyre_sim.calibrate --held-out           # also four shapes not used to calibrate
    python -m spyre_sim.calibrate --set overlap_beta=0 # the same with a DeviceParams override

Each target is `torch.mm(a, b)` on fp16 inputs (b a plain input, not a parameter), compiled
by `spyre_sim.compile` at 32 cores with numerics and noise off; the prediction is the kernel's
execution time alone (`RunResult.kernels[0].time_us`, no launch gap), which is what the
torch-spyre measurements report (device `kernel_ms`).

Measurements: torch-spyre-compiled kernels on a Spyre card, 32 cores, from the torch-spyre
design note "The Spyre matmul work-division cost model, from first principles" §9.1-9.2
(the torch-spyre repository's docs). The held-out shapes come from the same tables and session; no
parameter was set from them.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from spyre_sim.config import Config
from spyre_sim.device import DeviceParams
from spyre_sim.pipeline import compile as spyre_compile

TOLERANCE = 0.15  # the acceptance bar; torch-spyre's own fit is off 25-40 % on matmul


@dataclass(frozen=True)
class Target:
    name: str
    lhs: tuple[int, int]
    rhs: tuple[int, int]
    measured_us: float
    measured_split: str  # the (m, n, k) torch-spyre used when it measured


TARGETS: tuple[Target, ...] = (
    Target("QO prefill", (512, 4096), (4096, 4096), 324.0, measured_split="m8 n4"),
    Target("MLP prefill", (512, 4096), (4096, 12800), 1149.0, measured_split="m8 n4"),
    Target("QO decode", (1, 4096), (4096, 4096), 247.0, measured_split="n32"),
    Target("KV decode", (1, 4096), (4096, 1024), 62.0, measured_split="n16 k2"),
    Target("Qwen KV decode", (1, 3584), (3584, 512), 28.0, measured_split="n8 k4"),
)
HELD_OUT: tuple[Target, ...] = (
    Target("KV prefill", (512, 4096), (4096, 1024), 115.0, measured_split="m8 n4"),
    Target("QO bs4 decode", (4, 4096), (4096, 4096), 240.0, measured_split="m4 n8"),
    Target("KV bs4 decode", (4, 4096), (4096, 1024), 62.0, measured_split="m4 n8"),
    Target("MLP bs4 decode", (4, 4096), (4096, 12800), 761.0, measured_split="m4 n8"),
)


@dataclass(frozen=True)
class Prediction:
    target: Target
    predicted_us: float
    split: str  # the split the pipeline chose
    bound: str

    @property
    def error(self) -> float:
        return self.predicted_us / self.target.measured_us - 1.0


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b)


def calibration_config(device: DeviceParams | None = None) -> Config:
    """Timing only, noise off, 32 cores whatever SENCORES says (the targets ran on 32)."""
    return Config(numerics=False, noise_cv=0.0, cores=32, device=device or DeviceParams())


def predict(target: Target, config: Config) -> Prediction:
    """Compile and run `torch.mm` for one target; empty inputs, as numerics are off."""
    a = torch.empty(target.lhs, dtype=torch.float16)
    b = torch.empty(target.rhs, dtype=torch.float16)
    result = spyre_compile(_mm, (a, b), config).run(a, b)
    (kernel,) = result.kernels
    event = next(e for e in result.trace["traceEvents"]
                 if e["ph"] == "X" and e.get("cat") == "kernel")
    splits = sorted(event["args"]["split"].items(), key=lambda item: "bmnk".find(item[0]))
    split = " ".join(f"{d}{n}" for d, n in splits if n > 1)
    return Prediction(target, kernel.time_us, split, kernel.bound)


def calibrate(targets: Sequence[Target] = TARGETS,
              device: DeviceParams | None = None) -> list[Prediction]:
    config = calibration_config(device)
    return [predict(target, config) for target in targets]


def format_table(predictions: Sequence[Prediction], title: str) -> str:
    lines = [title,
             f"  {'kernel':16} {'shape':26} {'measured':>9} {'predicted':>9} {'error':>7}  "
             f"{'split (measured / chosen)':26} bound"]
    for p in predictions:
        t = p.target
        shape = f"{list(t.lhs)}x{list(t.rhs)}"
        lines.append(f"  {t.name:16} {shape:26} {t.measured_us:7.0f}us {p.predicted_us:7.1f}us "
                     f"{100 * p.error:+6.1f}%  {t.measured_split + ' / ' + p.split:26} {p.bound}")
    worst = max(abs(p.error) for p in predictions)
    rms = (sum(p.error ** 2 for p in predictions) / len(predictions)) ** 0.5
    lines.append(f"  max |error| {100 * worst:.1f}%, RMS {100 * rms:.1f}%")
    return "\n".join(lines)


def _device_overrides(pairs: Sequence[str]) -> DeviceParams:
    numbers = {f.name: f.type for f in dataclasses.fields(DeviceParams)
               if f.type in ("int", "float")}
    values: dict[str, Any] = {}  # each an int or a float, as its field is
    for pair in pairs:
        name, _, raw = pair.partition("=")
        if name not in numbers or not raw:
            raise SystemExit(f"--set {pair!r}: expected NAME=VALUE with NAME one of "
                             f"{sorted(numbers)}")
        values[name] = int(raw) if numbers[name] == "int" else float(raw)
    return DeviceParams(**values)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spyre_sim.calibrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--held-out", action="store_true",
                        help="also report the shapes no parameter was calibrated on")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override one DeviceParams number (repeatable)")
    args = parser.parse_args(argv)
    device = _device_overrides(args.set)
    predictions = calibrate(TARGETS, device)
    print(format_table(predictions, "calibration targets (fp16, 32 cores; kernel time alone)"))
    if args.held_out:
        print(format_table(calibrate(HELD_OUT, device), "held out (same source, not fitted)"))
    outside = [p for p in predictions if abs(p.error) > TOLERANCE]
    for p in outside:
        print(f"FAIL {p.target.name}: {100 * p.error:+.1f}% is outside ±{100 * TOLERANCE:.0f}%",
              file=sys.stderr)
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
