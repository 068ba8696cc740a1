"""Every compiler decision that can regress, named and switchable in one place.

`KNOBS` is the declarative table of those decisions (which stage asks, which values exist);
`Config` holds one value per knob plus the run settings. Stages ask one-line questions through
`Decisions.use(knob, describe)`, which also counts applications so a knob bisector can switch a
decision on for only its first N applications — the way PyTorch's CompilerBisector narrows a
pass to one application.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from spyre_sim.device import DeviceParams
from spyre_sim.errors import SpyreConfigError

# torch-spyre accepts SENCORES in 1..32 (_inductor/config.py, work_division._validate_max_cores).
SENCORES_MIN, SENCORES_MAX = 1, 32


@dataclass(frozen=True)
class Knob:
    name: str
    stage: str
    choices: tuple[Any, ...]
    description: str


KNOBS: tuple[Knob, ...] = (
    Knob("cse", "decompose", (True, False),
         "merge identical decomposed ops (common-subexpression elimination)"),
    Knob("softmax_decomposition", "decompose", ("fused", "explicit"),
         "softmax as one spyre::softmax kernel, or amax-sub-exp-sum-div"),
    Knob("layernorm_decomposition", "decompose", ("fused", "explicit"),
         "layer_norm as spyre layernorm ops, or mean/var/rsqrt arithmetic"),
    Knob("fusion", "lower", (True, False),
         "fuse pointwise consumers into their producer's kernel (epilogues, chains)"),
    Knob("prepack_weights", "layout", (True, False),
         "store parameters in the stick layout their consumer needs, so no per-call restickify"),
    Knob("work_division", "kernel", ("cost_model", "output_first"),
         "how a kernel's iteration space is split across cores"),
    Knob("matmul_accumulation", "kernel", ("fp32", "fp16"),
         "precision of matmul partial sums (fp16: the 16-bit SEN169_FP16 format)"),
    Knob("reduction_accumulation", "kernel", ("fp32", "fp16"),
         "precision of sum/mean/softmax partial sums (fp16: the 16-bit SEN169_FP16 format)"),
)
KNOBS_BY_NAME = {knob.name: knob for knob in KNOBS}


def _cores_from_env() -> int:
    raw = os.environ.get("SENCORES")
    if raw is None or raw == "":
        return SENCORES_MAX
    try:
        return int(raw)
    except ValueError:
        raise SpyreConfigError(
            f"SENCORES={raw!r} is not an integer; set SENCORES to an integer in "
            f"{SENCORES_MIN}..{SENCORES_MAX} (or unset it for {SENCORES_MAX} cores)"
        ) from None


@dataclass(frozen=True, kw_only=True)
class Config:
    """Compiler decisions (see KNOBS) and run settings. Frozen: use `replace(**changes)`."""

    # -- compiler decisions; defaults are the production choices --
    cse: bool = True
    softmax_decomposition: str = "fused"
    layernorm_decomposition: str = "fused"
    fusion: bool = True
    prepack_weights: bool = True
    work_division: str = "cost_model"
    matmul_accumulation: str = "fp32"
    reduction_accumulation: str = "fp32"
    # -- target and run settings --
    cores: int = field(default_factory=_cores_from_env)  # SENCORES
    numerics: bool = True  # False: timing only, no values computed
    noise_cv: float = 0.015  # run-to-run coefficient of variation of device time; 0 = off
    noise_seed: int | None = 0  # None: a fresh, unseeded stream per program
    device: DeviceParams = field(default_factory=DeviceParams)
    # (knob, n): the knob's configured value applies to its first n applications only; later
    # applications use the value of `Config()` (used by the knob bisector).
    knob_scope: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.cores, int) or not SENCORES_MIN <= self.cores <= SENCORES_MAX:
            raise SpyreConfigError(
                f"SENCORES/cores={self.cores!r} is outside the supported range "
                f"{SENCORES_MIN}..{SENCORES_MAX}; set SENCORES (or Config(cores=...)) to an "
                f"integer in {SENCORES_MIN}..{SENCORES_MAX}"
            )
        for knob in KNOBS:
            value = getattr(self, knob.name)
            if value not in knob.choices:
                raise SpyreConfigError(
                    f"Config.{knob.name}={value!r} is not one of {list(knob.choices)}"
                )
        for name, count in self.knob_scope:
            if name not in KNOBS_BY_NAME or not isinstance(count, int) or count < 0:
                raise SpyreConfigError(
                    f"knob_scope entry ({name!r}, {count!r}) must name a knob from "
                    f"{sorted(KNOBS_BY_NAME)} and a count >= 0"
                )
        if not 0.0 <= self.noise_cv < 1.0:
            raise SpyreConfigError(f"noise_cv={self.noise_cv!r} must be in [0, 1)")

    def replace(self, **changes: Any) -> Config:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (for environment manifests and reproducers)."""
        data = asdict(self)
        data["knob_scope"] = [list(item) for item in self.knob_scope]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpyreConfigError(f"unknown Config fields {unknown}; known: {sorted(known)}")
        values = dict(data)
        if "device" in values and isinstance(values["device"], dict):
            device = dict(values["device"])
            if "few_core_bw" in device:
                device["few_core_bw"] = tuple(tuple(pair) for pair in device["few_core_bw"])
            values["device"] = DeviceParams(**device)
        if "knob_scope" in values:
            values["knob_scope"] = tuple((str(n), int(c)) for n, c in values["knob_scope"])
        return cls(**values)


class Decisions:
    """Answers a stage's questions about its knobs and counts each application.

    Logged under `spyre_sim.<stage>` so a compile log shows every decision taken.
    """

    def __init__(self, config: Config, stage: str) -> None:
        self._config = config
        self._scope = dict(config.knob_scope)
        self._counts: dict[str, int] = {}
        self._log = logging.getLogger(f"spyre_sim.{stage}")
        self.applications: list[tuple[str, int, str, Any]] = []

    def use(self, knob: str, describe: Callable[..., str]) -> Any:  # describe() takes none
        index = self._counts.get(knob, 0)
        self._counts[knob] = index + 1
        value = getattr(self._config, knob)
        limit = self._scope.get(knob)
        if limit is not None and index >= limit:
            value = getattr(_default_config(), knob)
        detail = describe()
        self.applications.append((knob, index, detail, value))
        self._log.debug("decision %s#%d %s -> %r", knob, index, detail, value)
        return value


_DEFAULTS: list[Config] = []


def _default_config() -> Config:
    if not _DEFAULTS:
        _DEFAULTS.append(Config(cores=SENCORES_MAX))
    return _DEFAULTS[0]
