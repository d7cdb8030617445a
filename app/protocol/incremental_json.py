"""Parse a session's request body by reusing the previous call's parse.

Agents resend the whole transcript: a 1M-character session is a 1.3 MB body, ~3 ms to parse
on every call, and the next call's body is the same bytes with new messages inserted before
the ``]`` that closes ``messages``.  When exactly that holds:

    new == old[:close] + b"," + X + old[close:]      (old[close] is that ``]``)

and ``b"[" + X + b"]"`` parses as one JSON array (so X is a comma-separated list of values and
cannot reach outside the array), the new body is the old object with those values appended to
``messages``; only X is parsed.  Anything else (an edited message, another field changed,
pretty-printed JSON) parses the whole body.  ``close`` of a fully parsed body is found once by
a vectorised scan of its JSON structure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from app.tokenization.diff import common_prefix
from app.tokenization.lru import LruCache


@dataclass(frozen=True, slots=True)
class ParsedBody:
    body: Any
    reused_messages: int
    """How many leading messages are the previous call's (already validated) objects."""


@dataclass(frozen=True, slots=True)
class _Previous:
    data: bytes
    body: dict[str, Any]
    close: int


class BodyParser:
    """Per-session memo of the last body; thread-safe, bounded by bytes.  ``array`` names the
    top-level array that grows ("messages" for chat and Anthropic, "input" for Responses)."""

    def __init__(self, max_bytes: int, *, array: str = "messages") -> None:
        self._previous: LruCache[str, _Previous] = LruCache(max_bytes)
        self._array = array

    def parse(self, data: bytes, key: str | None) -> ParsedBody:
        """``orjson.loads(data)``; raises ``orjson.JSONDecodeError`` like it."""
        previous = self._previous.get(key) if key is not None else None
        if previous is not None:
            appended = _appended(previous, data, self._array)
            if appended is not None:
                body, close = appended
                self._remember(key, data, body, close)
                return ParsedBody(body, len(previous.body[self._array]))
        body = orjson.loads(data)
        if key is not None and isinstance(body, dict) and isinstance(body.get(self._array), list):
            found = array_close(data, self._array)
            if found is not None and body[self._array]:
                self._remember(key, data, body, found)
        return ParsedBody(body, 0)

    def _remember(self, key: str | None, data: bytes, body: dict[str, Any], close: int) -> None:
        if key is not None:
            # The parsed objects cost several times the bytes they came from.
            self._previous.put(key, _Previous(data, body, close), 5 * len(data))


def _appended(
    previous: _Previous, data: bytes, array: str
) -> tuple[dict[str, Any], int] | None:
    old, close = previous.data, previous.close
    if len(data) <= len(old) or data[close : close + 1] != b",":
        return None
    tail = len(old) - close
    if common_prefix(old, data) != close or data[len(data) - tail :] != old[close:]:
        return None
    try:
        extra = orjson.loads(b"[" + data[close + 1 : len(data) - tail] + b"]")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(extra, list) or not extra:
        return None
    body = dict(previous.body)
    body[array] = [*previous.body[array], *extra]
    return body, len(data) - tail


def array_close(data: bytes, array: str = "messages") -> int | None:
    """Offset of the ``]`` closing the top-level array ``array`` of a JSON object, or None
    when there is no such array."""
    key = orjson.dumps(array)
    raw = np.frombuffer(data, dtype=np.uint8)
    quotes = _unescaped_quotes(raw)
    brackets = np.flatnonzero(np.isin(raw, np.frombuffer(b"{}[]", np.uint8)))
    outside = np.searchsorted(quotes, brackets) % 2 == 0
    brackets = brackets[outside]
    if not len(brackets):
        return None
    opening = np.isin(raw[brackets], np.frombuffer(b"{[", np.uint8))
    depth_after = np.cumsum(np.where(opening, 1, -1))
    start = 0
    while (found := data.find(key, start)) >= 0:
        start = found + 1
        k = int(np.searchsorted(quotes, found))
        if k == len(quotes) or quotes[k] != found or k % 2:
            continue  # not the start of a string token
        before = int(np.searchsorted(brackets, found))
        if before == 0 or depth_after[before - 1] != 1:
            continue  # not a key of the top-level object
        value = found + len(key)
        while value < len(data) and data[value] in b" \t\r\n:":
            value += 1
        if value >= len(data) or data[value] != ord("[") or before >= len(brackets):
            return None
        if brackets[before] != value:
            return None
        closes = np.flatnonzero(depth_after[before:] == 1)
        return int(brackets[before + int(closes[0])]) if len(closes) else None
    return None


def _unescaped_quotes(raw: npt.NDArray[np.uint8]) -> npt.NDArray[np.intp]:
    """Positions of ``"`` not escaped by an odd run of backslashes."""
    quotes = np.flatnonzero(raw == ord('"'))
    backslash = raw == ord("\\")
    if not backslash.any():
        return quotes
    index = np.arange(len(raw))
    last_other = np.maximum.accumulate(np.where(backslash, -1, index))
    before = quotes - 1
    run = np.where(before >= 0, before - last_other[np.maximum(before, 0)], 0)
    kept: npt.NDArray[np.intp] = quotes[run % 2 == 0]
    return kept
