from typing import Any

def parts(
    data: bytes, start: int, end: int, limit: int, /
) -> tuple[int, list[Any], int, str | None, int]:
    """(kind, spans, fail_at, reason, nesting): a string's cut offsets (kind 0) or the (start,
    end, key_end, value) of an array's elements (1) or an object's members (2); where the
    scan stopped, and why (None: it did not); how deeply what it read nests: see
    ``_json_spans.c``."""

def too_deep(data: bytes, max_levels: int, outer_levels: int, /) -> int:
    """The offset of the first bracket, outside strings, that opens level max_levels + 1."""

def position(data: bytes, at: int, /) -> tuple[int, int, int]:
    """(character index, line, column) of ``data[at]``, as ``json.JSONDecodeError`` counts."""
