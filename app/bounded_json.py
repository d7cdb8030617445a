"""``orjson.loads`` of a large body in bounded pieces, so no step holds the GIL for long.

One ``orjson.loads`` holds the GIL for the whole parse (~2 ns a byte: ~110 ms for a 53 MB
body of escaped quotes), and the event loop waits that long even when the parse runs in a
worker thread.  ``loads`` has ``_json_spans.parts`` (C, without the GIL) find where a value
over ``PIECE_BYTES`` can be cut: a large string into pieces of its content, a large array or
object into runs of elements (members) and single large ones, which are cut in turn.  orjson
parses each piece and Python joins them: a string's pieces with ``str.join``, an array's with
``list.extend``, an object's with ``dict.update`` and item assignment, in the body's order,
which is how orjson builds a dict itself (a duplicate key keeps its first place and its last
value).

The pieces are cut so that every piece of valid JSON is valid JSON, and where every piece
parses, the glue between them that the scan checked makes the whole body valid: the result is
then orjson's.  Anything else (a piece that fails, a shape the scan does not cut, a body
nesting deeper than ``MAX_NESTING``, large values nested deeper than ``MAX_DEPTH``) is parsed
by one ``orjson.loads`` of the whole body, so what orjson refuses is refused with orjson's own
error, and whatever it accepts is read as it reads it.  That whole parse is the one step left
unbounded: a malformed body, or one nested that deep, holds the GIL as long as orjson takes.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import orjson

try:
    from app._json_spans import parts
except ImportError:  # a checkout whose C extensions are not built: bodies are parsed whole
    parts = None  # type: ignore[assignment]

PIECE_BYTES = 256 << 10
"""The most bytes orjson parses in one call, give or take an escape: ~0.5 ms of escaped
quotes, ~1.5 ms of small integers (an upstream's ids), each a new object."""
MAX_DEPTH = 32
"""How deep large values may nest before the body is parsed whole (each level scans its
value again)."""
MAX_NESTING = 512
"""A body nesting deeper is parsed whole: orjson refuses one deeper than 1024 levels, which
pieces, each nesting less than the body, would not see."""


class _Whole(Exception):
    """The body is not cut: parse it whole."""


def loads(data: bytes, piece_bytes: int = PIECE_BYTES) -> Any:
    """``orjson.loads(data)``, the same value or the same ``JSONDecodeError``."""
    if len(data) <= piece_bytes or parts is None:
        return orjson.loads(data)
    try:
        return _value(data, 0, len(data), piece_bytes, 0)
    except (_Whole, orjson.JSONDecodeError):
        return orjson.loads(data)


def _value(data: bytes, start: int, end: int, piece_bytes: int, depth: int) -> Any:
    if end - start <= piece_bytes:
        return orjson.loads(data[start:end])
    found = parts(data, start, end, piece_bytes) if depth < MAX_DEPTH else None
    if found is None:
        raise _Whole
    kind, spans, nesting = found
    if depth == 0 and nesting > MAX_NESTING:  # the body's own: every value in it nests less
        raise _Whole
    if kind == 0:
        return "".join(_piece(b'"%b"', data[a:b], str) for a, b in pairwise(spans))
    if kind == 1:
        items: list[Any] = []
        for a, b, _, value in spans:
            if value < 0:
                items.extend(_piece(b"[%b]", data[a:b], list))
            else:
                items.append(_value(data, a, b, piece_bytes, depth + 1))
        return items
    members: dict[str, Any] = {}
    for a, b, key_end, value in spans:
        if value < 0:
            members.update(_piece(b"{%b}", data[a:b], dict))
        else:
            key = _value(data, a, key_end, piece_bytes, depth + 1)
            members[key] = _value(data, value, b, piece_bytes, depth + 1)
    return members


def _piece(frame: bytes, inner: bytes, kind: type) -> Any:
    """orjson's value of ``inner`` in its ``frame`` (quotes or brackets), of type ``kind``."""
    value = orjson.loads(frame % inner)
    if not isinstance(value, kind):
        raise _Whole
    return value


def array_span(data: bytes, key: str) -> tuple[int, int] | None:
    """Offsets of the ``[`` and ``]`` of the array under ``key`` in the JSON object ``data``
    (one orjson accepts), found by the scan without the GIL; None when there is no such array,
    or the object has the key more than once in any spelling (orjson reads the last of
    duplicate keys).  A limit of 1 byte makes every member one of its own."""
    found = parts(data, 0, len(data), 1) if parts is not None else None
    if found is None or found[0] != 2:
        return None
    spans = [(v, b) for a, b, k, v in found[1] if loads(data[a:k]) == key]
    if len(spans) != 1:
        return None
    value, end = spans[0]
    return (value, end - 1) if data[value : value + 1] == b"[" else None
