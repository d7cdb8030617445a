"""Python literals read as JSON values, with ``ast`` and never evaluated.

Accepted: strings, numbers (finite), booleans, ``None``, lists, tuples and sets (as arrays),
dicts with string keys (each once), a sign before a number, and the JSON names
``true``/``false``/``null`` some models write. Anything else is ``NotLiteral``.
"""

from __future__ import annotations

import ast
import math
import warnings
from typing import Any

_JSON_NAMES = {"true": True, "false": False, "null": None}


class NotLiteral(ValueError):
    pass


def parse_expression(text: str) -> ast.expr:
    """``text`` as one Python expression; ``NotLiteral`` when it is not one (or too deep)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in a string are text
            return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise NotLiteral("not one Python expression") from exc


def literal_value(node: ast.expr) -> Any:
    """The JSON value a literal node stands for."""
    if isinstance(node, ast.Constant):
        value = node.value
        if (
            value is None
            or isinstance(value, str | int)
            or (isinstance(value, float) and math.isfinite(value))
        ):
            return value
        raise NotLiteral("not a JSON value")
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = literal_value(node.operand)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
        raise NotLiteral("a sign before a non-number")
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [literal_value(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            name = None if key is None else literal_value(key)
            if not isinstance(name, str) or name in out:
                raise NotLiteral("a dict key that is not a new string")
            out[name] = literal_value(item)
        return out
    raise NotLiteral(type(node).__name__)


def python_value(text: str) -> Any:
    """The JSON value of ``text`` written as one Python literal (``{'a': True}``)."""
    try:
        return literal_value(parse_expression(text))
    except RecursionError as exc:
        raise NotLiteral("nested too deeply") from exc
