"""The investigation document: what `regressions` found about one alert, as `reports` reads it.

The document is produced by the investigation side (commit, stage and knob bisection,
minimization, the probe's timing at both commits) and consumed here. Its fields are listed in
docs/formats.md. Validation happens once, on input, so every renderer can index the document
without defensive code; a missing field, a field of the wrong type or a version this package
does not know raises one `SpyreRegressError` that names the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from regressions.errors import SpyreRegressError

INVESTIGATION_VERSION = 1
# Versions of the lead-owned sub-documents this package understands (regressions/bisect.py,
# regressions/stages.py FORMAT_VERSION).
SUBDOCUMENT_VERSIONS = {"bisect": 1, "stages": 1}
METRICS = ("device_time", "compile_time", "numerics")
ERROR_FIELDS = ("max_abs", "max_rel", "rmse", "rmse_ratio")
SIDES = ("good", "bad")

_NUMBER = "number"
_NONE = type(None)
# (dotted path, allowed types). `[]` walks every item of a list. A path is only checked when
# its parent exists and is not null, so optional sub-documents are declared once.
_SCHEMA: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("alert", (dict,)),
    ("alert.good_commit", (str,)),
    ("alert.bad_commit", (str,)),
    ("alert.kind", (str,)),
    ("alert.members", (list,)),
    ("alert.members[]", (dict,)),
    ("alert.members[].benchmark", (str,)),
    ("alert.members[].params", (str, list, dict, _NONE)),
    ("alert.members[].ratio", (_NUMBER, _NONE)),
    ("alert.members[].ci", (list, _NONE)),
    ("alert.members[].p", (_NUMBER, _NONE)),
    ("alert.members[].q", (_NUMBER, _NONE)),
    ("alert.probe", (dict,)),
    ("alert.probe.benchmark", (str,)),
    ("metric", (str,)),
    ("commits", (dict,)),
    ("commits.good", (dict,)),
    ("commits.good.sha", (str,)),
    ("commits.good.subject", (str,)),
    ("commits.bad", (dict,)),
    ("commits.bad.sha", (str,)),
    ("commits.bad.subject", (str,)),
    ("commits.culprit", (dict, _NONE)),
    ("commits.culprit.sha", (str,)),
    ("commits.culprit.subject", (str,)),
    ("bisect", (dict, _NONE)),
    ("bisect.version", (int,)),
    ("bisect.steps", (list,)),
    ("bisect.steps[]", (dict,)),
    ("bisect.steps[].commit", (str,)),
    ("bisect.steps[].verdict", (str,)),
    ("stages", (dict,)),
    ("stages.version", (int,)),
    ("stages.workload", (str,)),
    ("stages.shape", (str, list)),
    ("stages.first_divergent_stage", (str, _NONE)),
    ("stages.basis", (str, _NONE)),
    ("stages.diff", (str,)),
    ("stages.stages", (list,)),
    ("stages.stages[]", (dict,)),
    ("stages.stages[].stage", (str,)),
    ("stages.stages[].changed", (bool,)),
    ("stages.stages[].compile_s_good", (_NUMBER,)),
    ("stages.stages[].compile_s_bad", (_NUMBER,)),
    ("stages.kernels", (list,)),
    ("stages.kernels[]", (dict,)),
    ("stages.kernels[].name", (str,)),
    ("stages.kernels[].good_us", (_NUMBER, _NONE)),
    ("stages.kernels[].bad_us", (_NUMBER, _NONE)),
    ("stages.log_excerpt", (str,)),
    ("workaround", (dict, _NONE)),
    ("workaround.knob", (str,)),
    ("workaround.stage", (str,)),
    ("minimized", (dict, _NONE)),
    ("minimized.source", (str,)),
    ("probe", (dict,)),
    ("probe.workload", (str,)),
    ("probe.seq", (int,)),
    ("probe.width", (int, _NONE)),
    ("probe.config", (dict,)),
    ("timing", (dict,)),
    ("timing.good", (dict,)),
    ("timing.good.status", (str,)),
    ("timing.bad", (dict,)),
    ("timing.bad.status", (str,)),
    ("traces", (dict,)),
    ("traces.good", (str, _NONE)),
    ("traces.bad", (str, _NONE)),
)
# A timing whose status is "ok" must carry the measurement (regressions/probe.py cmd_timing).
_TIMING_OK_SCHEMA: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("host_s", (list,)),
    ("host_s[]", (_NUMBER,)),
    ("device_us", (list,)),
    ("device_us[]", (_NUMBER,)),
    ("errors", (dict,)),
    *((f"errors.{name}", (_NUMBER,)) for name in ERROR_FIELDS),
    ("kernels", (list,)),
    ("kernels[]", (dict,)),
    ("kernels[].name", (str,)),
    ("kernels[].time_us", (_NUMBER,)),
    ("compile_times", (dict,)),
    ("environment", (dict,)),
    ("config", (dict,)),
)


def _type_name(allowed: tuple[Any, ...]) -> str:
    names = {_NUMBER: "number", _NONE: "null", dict: "object", list: "array", str: "string",
             int: "integer", bool: "boolean"}
    return " or ".join(names.get(t, str(t)) for t in allowed)


def _matches(value: Any, allowed: tuple[Any, ...]) -> bool:
    for kind in allowed:
        if kind is _NUMBER:
            # JSON numbers; a boolean is not a number even though Python says so.
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return True
        elif kind is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return True
        elif isinstance(value, kind):
            return True
    return False


def _values_at(document: Any, path: str) -> list[tuple[str, Any, bool]]:
    """(concrete path, value, present) for every place `path` names; skips null parents."""
    found = [("", document, True)]
    for part in path.split("."):
        walk_items = part.endswith("[]")
        key = part[:-2] if walk_items else part
        next_found = []
        for where, value, present in found:
            if not present or not isinstance(value, dict):
                continue
            here = f"{where}.{key}" if where else key
            if key not in value:
                next_found.append((here, None, False))
                continue
            child = value[key]
            if walk_items:
                if isinstance(child, list):
                    next_found += [(f"{here}[{i}]", item, True) for i, item in enumerate(child)]
            else:
                next_found.append((here, child, True))
        found = next_found
    return found


def _check(document: Any, schema: tuple[tuple[str, tuple[Any, ...]], ...], prefix: str) -> None:
    for path, allowed in schema:
        for where, value, present in _values_at(document, path):
            name = f"{prefix}{where}"
            if not present:
                raise SpyreRegressError(
                    f"investigation field `{name}` is missing; docs/formats.md lists the "
                    "investigation fields")
            if not _matches(value, allowed):
                raise SpyreRegressError(
                    f"investigation field `{name}` must be {_type_name(allowed)}, got "
                    f"{type(value).__name__} {str(value)[:60]!r}")


def _check_version(value: Any, name: str, known: int) -> None:
    if not _matches(value, (int,)):
        raise SpyreRegressError(f"investigation field `{name}` must be an integer version, got "
                                f"{value!r}")
    if value > known:
        raise SpyreRegressError(
            f"investigation field `{name}` is {value}, newer than this spyre-regress reads "
            f"({known}); upgrade spyre-regress (pip install -e .) to render it")
    if value < 1:
        raise SpyreRegressError(f"investigation field `{name}` is {value}; versions start at 1")


def validate_investigation(document: Any) -> dict:
    """Check an investigation document against format version 1 and return it.

    Raises:
        SpyreRegressError: naming the first field that is missing, mistyped or of an unknown
            version.
    """
    if not isinstance(document, Mapping):
        raise SpyreRegressError("the investigation must be a JSON object (docs/formats.md)")
    if "version" not in document:
        raise SpyreRegressError("investigation field `version` is missing; this spyre-regress "
                                f"reads version {INVESTIGATION_VERSION}")
    _check_version(document["version"], "version", INVESTIGATION_VERSION)
    _check(document, _SCHEMA, "")
    if document["metric"] not in METRICS:
        raise SpyreRegressError(f"investigation field `metric` is {document['metric']!r}; "
                                f"choose one of {list(METRICS)}")
    tolerance = document.get("tolerance")
    if tolerance is not None:
        _check({"tolerance": tolerance}, (("tolerance", (dict,)),), "")
        for name in ("rmse_ratio", "max_abs"):
            if name in tolerance and not (_matches(tolerance[name], (_NUMBER,))
                                          and tolerance[name] > 0):
                raise SpyreRegressError(f"investigation field `tolerance.{name}` must be a "
                                        f"positive number, got {tolerance[name]!r}")
    for name, known in SUBDOCUMENT_VERSIONS.items():
        if document.get(name) is not None:
            _check_version(document[name]["version"], f"{name}.version", known)
    for side in SIDES:
        timing = document["timing"][side]
        if timing["status"] == "ok":
            _check(timing, _TIMING_OK_SCHEMA, f"timing.{side}.")
            for series in ("host_s", "device_us"):
                if not timing[series]:
                    raise SpyreRegressError(f"investigation field `timing.{side}.{series}` is "
                                            "empty; the probe's timing needs iterations >= 1")
                if not all(math.isfinite(v) and v > 0 for v in timing[series]):
                    raise SpyreRegressError(f"investigation field `timing.{side}.{series}` "
                                            "must hold positive finite times")
    if not any(document["timing"][side]["status"] == "ok" for side in SIDES):
        raise SpyreRegressError("investigation fields `timing.good.status` and "
                                "`timing.bad.status` are both not \"ok\": nothing to report")
    return dict(document)


def load_investigation(path: Path) -> dict:
    """Read and validate an investigation JSON file."""
    try:
        document = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SpyreRegressError(f"no investigation file at {path}; pass the JSON the "
                                "investigation wrote") from None
    except json.JSONDecodeError as exc:
        raise SpyreRegressError(f"{path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    return validate_investigation(document)
