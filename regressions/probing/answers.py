"""A probe's answer read into the protocol's dataclasses, once, at the boundary.

The child writes JSON (`probe.py`, with `protocol.py`'s types); here the tool reads it back
through the codec, which checks every field: an answer that measured becomes the command's
answer type (`protocol.ANSWERS`), any other becomes `Failed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from regressions.codec import RecordError, from_json
from regressions.errors import SpyreRegressError
from regressions.probing.protocol import Failed

T = TypeVar("T")


def read(cls: type[T], answer: Mapping[str, Any], command: str) -> T | Failed:
    """The answer of `command` as `cls` when it measured, else `Failed`.

    Raises:
        SpyreRegressError: an answer that does not have the fields its command writes (a
            probe of another version of this tool).
    """
    known = {name: value for name, value in answer.items() if name not in ("version",
                                                                           "traceback")}
    try:
        if answer.get("status") != "ok":
            return from_json(Failed, {"status": known.get("status"),
                                      "detail": str(known.get("detail", "")),
                                      "stage": known.get("stage")}, command)
        return from_json(cls, known, command)
    except RecordError as error:
        raise SpyreRegressError(f"the {command} probe answered something this spyre-regress "
                                f"cannot read: {error}") from None
