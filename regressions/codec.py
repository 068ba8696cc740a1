"""Dataclasses to JSON-ready values and back: one codec for every document the tool writes.

`to_json` turns (nested) dataclasses, tuples and mappings into dicts, lists and numbers, with
non-finite floats as null (JSON has none). `from_json` rebuilds a dataclass from such a value,
guided by the field annotations, and checks every field on the way: a missing field, a value
of the wrong type or an unknown literal raises `RecordError` naming the field's path, so a
document is validated exactly once, where it is read, by the types that describe it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class RecordError(ValueError):
    """A document does not match the dataclass it should describe; the message names where."""


def to_json(value: Any) -> Any:
    """`value` as JSON-ready data: dataclasses as dicts, tuples as lists, inf/NaN as None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def from_json(cls: type[T], data: Any, where: str = "") -> T:
    """An instance of the dataclass `cls` from `to_json`-shaped data, checked field by field.

    Fields with a default may be absent. Raises:
        RecordError: naming the first field (dotted path) that is missing or mistyped.
    """
    return _convert(cls, data, where or cls.__name__)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _dataclass(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise RecordError(f"`{where}` must be an object, got {_describe(data)}")
    hints = _hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        path = f"{where}.{f.name}"
        if f.name in data:
            values[f.name] = _convert(hints[f.name], data[f.name], path)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise RecordError(f"`{path}` is missing")
    return cls(**values)


def _convert(annotation: Any, data: Any, where: str) -> Any:
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return data
    if dataclasses.is_dataclass(annotation):
        return _dataclass(typing.cast(type, annotation), data, where)
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in arguments:
            return None
        errors = []
        for arm in (a for a in arguments if a is not type(None)):
            try:
                return _convert(arm, data, where)
            except RecordError as error:
                errors.append(error)
        nested = [e for e in errors if not str(e).startswith(f"`{where}` must be")]
        # an error inside a nested record says more than "must be X or null"
        raise nested[0] if len(errors) == 1 and nested else RecordError(
            f"`{where}` must be {_name(annotation)}, got {_describe(data)}")
    if origin is typing.Literal:
        if data not in arguments:
            raise RecordError(f"`{where}` must be one of {list(arguments)}, got {data!r}")
        return data
    if origin in (tuple, list):
        if not isinstance(data, (list, tuple)):
            raise RecordError(f"`{where}` must be a list, got {_describe(data)}")
        if origin is tuple and arguments and arguments[-1] is not Ellipsis:
            if len(data) != len(arguments):
                raise RecordError(f"`{where}` must hold {len(arguments)} items, got {len(data)}")
            return tuple(_convert(a, v, f"{where}[{i}]")
                         for i, (a, v) in enumerate(zip(arguments, data, strict=True)))
        item = arguments[0] if arguments else Any
        items = [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(data)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        if not isinstance(data, Mapping):
            raise RecordError(f"`{where}` must be an object, got {_describe(data)}")
        value_type = arguments[1] if len(arguments) == 2 else Any
        return {k: _convert(value_type, v, f"{where}.{k}") for k, v in data.items()}
    return _scalar(annotation, data, where)


def _scalar(annotation: Any, data: Any, where: str) -> Any:
    if annotation is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
    elif annotation is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
    elif isinstance(annotation, type) and isinstance(data, annotation):
        return data
    raise RecordError(f"`{where}` must be {_name(annotation)}, got {_describe(data)}")


def _name(annotation: Any) -> str:
    names = {float: "a number", int: "an integer", str: "a string", bool: "true or false",
             type(None): "null"}
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(_name(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(annotation)))
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _describe(data: Any) -> str:
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(data), type(data).__name__)
    return f"{kind} {str(data)[:60]!r}" if not isinstance(data, (dict, list)) else kind
