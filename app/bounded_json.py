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

Every piece of valid JSON is valid JSON: a string is cut only between its characters and
escapes (never between the two escapes of a surrogate pair), a container only at the commas
between whole elements, which the scan finds exactly where the text is valid (strings
skipped, brackets counted), so a piece holds whole values in the frame (quotes or brackets)
they stood in, nesting less deeply than the body.  So a piece that orjson refuses proves the
body malformed, and where every piece parses, the glue between them that the scan checked
makes the whole body valid: the result is then orjson's.  A malformed body is refused without
a parse of the whole, with orjson's error where its first error lies: the scan stops at the
first glue it cannot read (saying what orjson says there, or naming a value that does not
end, whose own pieces are then read), the pieces before that point are parsed in order, and
the first error found is orjson's message for its piece with the position made the body's
(character index, line and column, counted in C).  Like orjson, a body with invalid UTF-8
anywhere is refused for that first, at position 0.

Refused although orjson would read them (``docs/limits.md``): a body nesting deeper than
``MAX_NESTING`` levels (at every size: the bracket that opens level 513, outside strings, is
found first, whatever else is wrong), a value over ``PIECE_BYTES`` nested deeper than
``MAX_DEPTH`` levels (each level would scan it again), and a number over ``PIECE_BYTES``.
The error then differs from orjson's whole parse, and also where the first error lies inside
such a value; elsewhere ``tests/test_bounded_json.py`` finds them equal (message, position,
line and column; the error's ``doc`` is empty, not the body decoded).
"""

from __future__ import annotations

import codecs
from itertools import pairwise
from typing import Any

import orjson

try:
    from app._json_spans import parts, position, too_deep
except ImportError:  # a checkout whose C extensions are not built: bodies are parsed whole
    parts = None  # type: ignore[assignment]

PIECE_BYTES = 256 << 10
"""The most bytes orjson parses in one call, give or take an escape: ~0.5 ms of escaped
quotes, ~1.5 ms of small integers (an upstream's ids), each a new object."""
MAX_DEPTH = 32
"""How deep a value over ``PIECE_BYTES`` may nest (each level scans its value again)."""
MAX_NESTING = 512
"""How deep a body may nest (orjson reads up to 1024 levels, which cut pieces, each nesting
less than the body, would not see)."""
_UTF8_SLICE = 1 << 20
_NOT_UTF8 = "str is not valid UTF-8: surrogates not allowed"


class _Malformed(Exception):
    """The body is refused with ``msg`` at byte ``at``."""

    def __init__(self, msg: str, at: int) -> None:
        super().__init__(msg, at)
        self.msg, self.at = msg, at


def loads(data: bytes, piece_bytes: int = PIECE_BYTES, *, outer_levels: int = 0) -> Any:
    """``orjson.loads(data)``, the same value or the same ``JSONDecodeError`` (except for the
    refusals above); ``outer_levels``: how deeply ``data`` stands in a body, for its nesting."""
    if parts is None:
        return orjson.loads(data)
    try:
        if len(data) <= piece_bytes:
            _nesting(data, outer_levels)
            return orjson.loads(data)
        found = parts(data, 0, len(data), piece_bytes)
        if found[3] is not None or found[4] + outer_levels > MAX_NESTING:
            _nesting(data, outer_levels)  # its scan read every bracket of a body it cuts
        return _value(data, 0, len(data), piece_bytes, 0, found=found)
    except _Malformed as bad:
        raise _error(data, bad.msg, bad.at) from None


def _nesting(data: bytes, outer_levels: int) -> None:
    deep = too_deep(data, MAX_NESTING, outer_levels)
    if deep >= 0:
        raise _Malformed(f"JSON nested too deeply (over {MAX_NESTING} levels)", deep)


def utf8_error(data: bytes) -> tuple[int, str] | None:
    """(offset, reason) of the first byte that is not UTF-8, as ``data.decode()`` says; None
    when there is none.  Decoded 1 MiB at a time (well under a millisecond each), so other
    threads run between the slices."""
    view, start = memoryview(data), 0
    while True:
        end = min(len(data), start + _UTF8_SLICE)
        try:
            used = codecs.utf_8_decode(view[start:end], "strict", end == len(data))[1]
        except UnicodeDecodeError as bad:
            return start + bad.start, bad.reason
        if end == len(data):
            return None
        start += used


def _error(data: bytes, msg: str, at: int) -> orjson.JSONDecodeError:
    """orjson's error for ``msg`` at byte ``at``: its message names the position."""
    if utf8_error(data) is not None:
        msg, (pos, line, column) = _NOT_UTF8, (0, 1, 1)
    else:
        pos, line, column = position(data, at)
    error = orjson.JSONDecodeError.__new__(orjson.JSONDecodeError)
    ValueError.__init__(error, f"{msg}: line {line} column {column} (char {pos})")
    error.msg, error.doc, error.pos, error.lineno, error.colno = msg, "", pos, line, column
    return error


def _value(
    data: bytes,
    start: int,
    end: int,
    piece_bytes: int,
    depth: int,
    frame: bytes = b"%b",
    found: tuple[int, list[Any], int, str | None, int] | None = None,
) -> Any:
    """The value of ``data[start:end]``; ``frame``: its context, ``[%b]`` for an element or
    ``{"":%b}`` for a member's value (without the closing bracket where the body stops after
    it), in which orjson reads a small one (where a number runs into a stray byte or the end
    of data, its error depends on what follows it); ``found``: its ``parts``."""
    if end - start <= piece_bytes:
        return _unframed(frame, data, start, end)
    if depth < MAX_DEPTH:
        kind, spans, fail_at, reason, _ = found or parts(data, start, end, piece_bytes)
        if reason != "scalar":
            open_last = reason is not None and kind > 0 and bool(spans) and spans[-1][1] == end
            value = _joined(data, kind, spans, piece_bytes, depth, open_last)
            if reason is not None:  # "open": the last item, which does not end, raised first
                raise _Malformed(reason, fail_at)
            return value
    if end - start <= PIECE_BYTES:  # a scalar, or a value nested deeper, read whole
        return _unframed(frame, data, start, end)
    if depth >= MAX_DEPTH:
        raise _Malformed(
            f"JSON nested too deeply (a value over {PIECE_BYTES} bytes at over {MAX_DEPTH} levels)",
            start,
        )
    probe = start + 512  # orjson's error, unless it reads a number; a character kept whole
    while data[probe] & 0xC0 == 0x80:
        probe -= 1
    try:
        _unframed(frame, data, start, probe)
    except _Malformed as bad:
        if bad.at < probe:  # not the probe's own end
            raise
    raise _Malformed(f"JSON number over {PIECE_BYTES} bytes", start)


def _joined(
    data: bytes, kind: int, spans: list[Any], piece_bytes: int, depth: int, open_last: bool
) -> Any:
    """The value of the ``spans`` of ``parts``, each piece parsed in the body's order;
    ``open_last``: the last item runs into the end of what the scan read, where the body
    stops: it is read with no bracket after it, as orjson reads it there."""
    if kind == 0:
        return "".join(_piece(b'"%b"', data, a, b) for a, b in pairwise(spans))
    last = len(spans) - 1 if open_last else -1
    if kind == 1:
        items: list[Any] = []
        for k, (a, b, _, value) in enumerate(spans):
            frame = b"[%b" if k == last else b"[%b]"
            if value < 0:
                items.extend(_piece(frame, data, a, b))
            else:
                items.append(_value(data, a, b, piece_bytes, depth + 1, frame))
        return items
    members: dict[str, Any] = {}
    for k, (a, b, key_end, value) in enumerate(spans):
        if value < 0:
            members.update(_piece(b"{%b" if k == last else b"{%b}", data, a, b))
        else:
            key = _value(data, a, key_end, piece_bytes, depth + 1)
            if value == b:  # the scan stopped after this key
                break
            frame = b'{"":%b' if k == last else b'{"":%b}'
            members[key] = _value(data, value, b, piece_bytes, depth + 1, frame)
    return members


def _unframed(frame: bytes, data: bytes, start: int, end: int) -> Any:
    """The value of ``data[start:end]`` read in its ``frame``."""
    value = _piece(frame, data, start, end)
    return value if frame == b"%b" else value[0] if frame == b"[%b]" else value[""]


def _piece(frame: bytes, data: bytes, start: int, end: int) -> Any:
    """orjson's value of ``data[start:end]`` in its ``frame``; its error placed in ``data``."""
    try:
        return orjson.loads(frame % data[start:end])
    except orjson.JSONDecodeError as exc:
        offset = len(exc.doc[: exc.pos].encode("utf-8", "surrogatepass"))
        raise _Malformed(exc.msg, start + offset - frame.index(b"%")) from None


def array_span(data: bytes, key: str) -> tuple[int, int] | None:
    """Offsets of the ``[`` and ``]`` of the array under ``key`` in the JSON object ``data``
    (one orjson accepts), found by the scan without the GIL; None when there is no such array,
    or the object has the key more than once in any spelling (orjson reads the last of
    duplicate keys).  A limit of 1 byte makes every member one of its own."""
    if parts is None:
        return None
    kind, spans, _, reason, _ = parts(data, 0, len(data), 1)
    if kind != 2 or reason is not None:
        return None
    found = [(v, b) for a, b, k, v in spans if loads(data[a:k]) == key]
    if len(found) != 1:
        return None
    value, end = found[0]
    return (value, end - 1) if data[value : value + 1] == b"[" else None
