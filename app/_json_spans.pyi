from typing import Any

def parts(data: bytes, start: int, end: int, limit: int, /) -> tuple[int, list[Any]] | None:
    """(0, cut offsets of a string) or (1 or 2, (start, end, key_end, value) of an array's
    elements or an object's members), or None: see ``_json_spans.c``."""
