from typing import Any

def parts(data: bytes, start: int, end: int, limit: int, /) -> tuple[int, list[Any], int] | None:
    """(0, cut offsets of a string, 0) or (1 or 2, (start, end, key_end, value) of an array's
    elements or an object's members, the nesting depth), or None: see ``_json_spans.c``."""
