"""Typing Qwen3-Coder parameter values by the JSON schema of the request's tools.

Qwen3-Coder writes every parameter value as bare text; the tool's schema says what it was
meant to be. Non-string types are tried in the schema's order, ``string`` (or no usable
schema) last, and text that fits none stays the raw string: a value is never dropped. Where
a format's template writes objects, arrays and null with Python's ``str`` (Seed-OSS), those
types also read Python literals (``python_literals``, never evaluated).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from app.protocol.output.python_literals import python_value

_NOT_CONVERTED = object()
_PYTHON_TYPES = frozenset({"object", "array", "null"})
"""The types Python's ``str`` writes other than JSON does (``{'a': True}``, ``None``)."""


def parameter_schemas(tools: Iterable[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """``{function name: {parameter name: schema}}`` from OpenAI ``tools``."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools or ():
        function = tool.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, dict) else None
        out[function["name"]] = properties if isinstance(properties, dict) else {}
    return out


def _schema_types(schema: Any) -> list[str]:
    if not isinstance(schema, dict):
        return []
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    types: list[str] = []
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            types.extend(_schema_types(option))
    return types


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses what re-serialising would change or lose: NaN/Infinity
    (not JSON) and duplicate keys (all but the last dropped). Too deep is ``ValueError`` too."""
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc


def _read(text: str, python: bool) -> Any:
    """The JSON value ``text`` is, or what it is as a Python literal with ``python``."""
    try:
        return loads_strict(text)
    except ValueError:
        if not python:
            return _NOT_CONVERTED
    try:
        return python_value(text)
    except ValueError:
        return _NOT_CONVERTED


def _as_type(raw: str, type_name: str, python: bool) -> Any:
    text = raw.strip()
    if type_name == "boolean":
        lowered = text.lower()
        return lowered == "true" if lowered in ("true", "false") else _NOT_CONVERTED
    value = _read(text, python and type_name in _PYTHON_TYPES)
    if isinstance(value, bool):
        return _NOT_CONVERTED
    fits = (
        (type_name == "null" and value is None)
        or (type_name == "integer" and isinstance(value, int))
        or (type_name == "number" and isinstance(value, int | float))
        or (type_name == "object" and isinstance(value, dict))
        or (type_name == "array" and isinstance(value, list))
    )
    return value if fits else _NOT_CONVERTED


def convert_value(raw: str, schema: Any, *, python: bool = False) -> Any:
    """The JSON value ``raw`` stands for under ``schema``; ``raw`` itself when none fits.
    ``python``: an object, array or null may be written as a Python literal too."""
    for type_name in _schema_types(schema):
        if type_name == "string":
            continue
        value = _as_type(raw, type_name, python)
        if value is not _NOT_CONVERTED:
            return value
    return raw


def encode_call(name: str, arguments: dict[str, Any]) -> tuple[str, str] | None:
    """``(name, arguments as a JSON string)`` the way vLLM writes them
    (``json.dumps(..., ensure_ascii=False)``); ``None`` if a lone surrogate would break UTF-8.
    """
    serialised = json.dumps(arguments, ensure_ascii=False)
    try:
        (name + serialised).encode("utf-8")
    except UnicodeEncodeError:
        return None
    return name, serialised
