"""Sizes of parsed JSON values, for memory budgets."""

from __future__ import annotations

from typing import Any


def text_size(value: Any) -> int:
    """Characters of the strings in a JSON value."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(map(text_size, value.values()))
    if isinstance(value, list):
        return sum(map(text_size, value))
    return 0
