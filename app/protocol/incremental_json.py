"""Parse a session's request body by reusing the previous call's parse.

Agents resend the whole transcript: a 1M-character session is a 1.3 MB body, ~3 ms to parse
on every call, and the next call's body holds the previous call's ``messages`` array verbatim,
with new items appended before its ``]`` (and, for Claude Code, a small edit elsewhere: the
billing line in ``system`` changes every call).  ``BodyParser`` finds the old array's bytes in
the new body (at the same offset, or near it after an edit before it) and then:

* when nothing outside the array changed (``new == old[:close] + b"," + X + old[close:]``),
  only ``b"[" + X + b"]"`` is parsed; it must parse as one array, so X is a comma-separated
  list of values that cannot reach outside the array;
* otherwise X is delimited by decoding its values one by one, and the rest of the body is
  parsed with the array replaced by ``[MARK]``, a random integer drawn for this call: the
  rest must parse to an object whose array is exactly ``[MARK]``, which proves the array
  stood where we cut (a cut inside a string or another value cannot yield it).

Anything else (an edited message, pretty-printed JSON that moved) parses the whole body.  The
array's position in a fully parsed body is found once by a scan of its structure (C, without
the GIL: ``bounded_json.array_span``).

Reused items count as validated (``ParsedBody.reused_messages``, which lets the caller skip
checking them) only once the body they came from passed validation (``ParsedBody.valid``):
a rejected body's items are reused as parsed objects but checked again, so a memo never
turns a body a fresh process would refuse into one it accepts.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from app import bounded_json
from app.memos import Memos

_SHIFT = 1 << 16
"""How far an edit before the array may move it (Claude Code's billing line: a few bytes)."""


@dataclass(slots=True)
class _Previous:
    data: bytes
    body: dict[str, Any]
    open: int
    """Offset of the array's ``[``."""
    close: int
    """Offset of its ``]``."""
    validated: bool = False
    """The body passed validation (``ParsedBody.valid``)."""


@dataclass(frozen=True, slots=True)
class ParsedBody:
    body: Any
    reused_messages: int
    """How many leading messages are the previous call's objects, validated in it."""
    _entry: _Previous | None = None
    new_bytes: int | None = None
    """How many bytes the body grew by over the previous call's, when it extends it."""

    def valid(self) -> None:
        """Records that this body passed validation: the next call that extends it may skip
        checking the items it shares with it."""
        if self._entry is not None:
            self._entry.validated = True


class BodyParser:
    """Per-session memo of the last body (kept in ``memos``); thread-safe.  ``array`` names the
    top-level array that grows ("messages" for chat and Anthropic, "input" for Responses)."""

    def __init__(self, memos: Memos[_Previous], *, array: str = "messages") -> None:
        self._previous = memos
        self._array = array

    def parse(self, data: bytes, key: str | None) -> ParsedBody:
        """``orjson.loads(data)``; raises ``orjson.JSONDecodeError`` like it."""
        reused = self.extend(data, key, len(data))
        return reused if reused is not None else self._full(data, key)

    def extend(self, data: bytes, key: str | None, most: int) -> ParsedBody | None:
        """The parse of ``data`` as the previous body of ``key`` plus appended items, or None
        (no previous body, not an extension of it, or more than ``most`` bytes outside the
        reused array: only those bytes are parsed, the array's are compared, so ``most``
        bounds the work)."""
        previous = self._previous.get(key) if key is not None else None
        if previous is None or len(data) - (previous.close - previous.open) > most:
            return None
        appended = _appended(previous, data, self._array)
        if appended is None:
            return None
        self._remember(key, appended)
        reused = len(previous.body[self._array]) if previous.validated else 0
        return ParsedBody(appended.body, reused, appended, len(data) - len(previous.data))

    def _full(self, data: bytes, key: str | None) -> ParsedBody:
        body = bounded_json.loads(data)
        if key is not None and isinstance(body, dict) and isinstance(body.get(self._array), list):
            found = array_span(data, self._array)
            if found is not None and body[self._array]:
                entry = _Previous(data, body, *found)
                self._remember(key, entry)
                return ParsedBody(body, 0, entry)
        return ParsedBody(body, 0)

    def _remember(self, key: str | None, previous: _Previous) -> None:
        if key is not None:
            # The parsed objects cost several times the bytes they came from.
            self._previous.put(key, previous, 5 * len(previous.data))


def _appended(previous: _Previous, data: bytes, array: str) -> _Previous | None:
    """The new body, when it holds the previous array verbatim plus appended items."""
    old, start, close = previous.data, previous.open, previous.close
    items = memoryview(old)[start:close]  # "[" and the old items, without "]"
    at = start if data.startswith(items, start) else _moved(data, items, start)
    if at is None:
        return None
    after = at + len(items)
    tail = len(old) - close
    tail_same = data.endswith(memoryview(old)[close:])
    found: tuple[int, list[Any] | None] | None
    if tail_same and data[after : after + 1] == b",":
        found = len(data) - tail, _items(data[after + 1 : len(data) - tail])
    else:
        found = _appended_end(data, after)
    if found is None:
        return None
    end, extra = found
    if extra is None:
        return None
    body: dict[str, Any] | None
    unchanged = tail_same and end == len(data) - tail
    if unchanged and at == start and data.startswith(memoryview(old)[:start]):
        body = dict(previous.body)  # nothing outside the array changed
    else:
        body = _rest(data, at, end, array)
    if body is None:
        return None
    body[array] = [*previous.body[array], *extra]
    return _Previous(data, body, at, end)


def _moved(data: bytes, items: memoryview, start: int) -> int | None:
    """Where the old array's bytes stand in the new body after an edit before them."""
    probe = items[:64]
    at = data.find(probe, max(0, start - _SHIFT), start + _SHIFT + len(probe))
    return at if at >= 0 and data.startswith(items, at) else None


def _items(text: bytes) -> list[Any] | None:
    """The values of ``text`` read as the inside of one JSON array, or None."""
    try:
        values = bounded_json.loads(b"[" + text + b"]", outer_levels=1)  # as deep as the body
    except orjson.JSONDecodeError:
        return None
    return values if isinstance(values, list) else None


def _appended_end(data: bytes, after: int) -> tuple[int, list[Any]] | None:
    """(offset of the array's new ``]``, the appended values) for the items that follow
    ``after``, the end of the old items; the values are delimited by decoding them one by
    one, and parsed again by orjson so the result is exactly orjson's."""
    if data[after : after + 1] == b"]":
        return after, []
    if data[after : after + 1] != b",":
        return None
    text = data[after + 1 :].decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    index = 0
    try:
        while True:
            index = _skip_space(text, index)
            _, index = decoder.raw_decode(text, index)
            index = _skip_space(text, index)
            if text[index : index + 1] == "]":
                break
            if text[index : index + 1] != ",":
                return None
            index += 1
    except (ValueError, RecursionError):
        return None
    end = after + 1 + len(text[:index].encode("utf-8"))
    extra = _items(data[after + 1 : end])
    return None if extra is None else (end, extra)


def _skip_space(text: str, index: int) -> int:
    while text[index : index + 1] in (" ", "\t", "\n", "\r") and index < len(text):
        index += 1
    return index


def _rest(data: bytes, start: int, end: int, array: str) -> dict[str, Any] | None:
    """The body with its array parsed as ``[MARK]``; None unless that is where it stood."""
    mark = secrets.randbits(62)
    try:
        rest = bounded_json.loads(data[:start] + b"[%d]" % mark + data[end + 1 :])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(rest, dict) or rest.get(array) != [mark]:
        return None
    return rest


def array_span(data: bytes, array: str = "messages") -> tuple[int, int] | None:
    """Offsets of the ``[`` and ``]`` of the top-level array ``array`` of a JSON object, or
    None when there is no such array or the object has the key more than once (in any
    spelling: orjson reads the last of duplicate keys, and a memo of another would extend
    an array the reader of the body never saw)."""
    return bounded_json.array_span(data, array)
