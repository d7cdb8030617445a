"""The text as the device receives it: UTF-8 bytes plus the byte spans of its added tokens.

Added tokens are split first, leftmost-longest on the raw text, as the reference does; the
stretches between them go through the normalizer (each alone, as in the reference) and the
tokens keep their own bytes.  The stages then mark each span (``marked``: its first byte
becomes 0xFF, which UTF-8 never contains, the rest continuation bytes) so the span decodes as
one sentinel character: one pass over the whole text, with the sentinels standing where the
reference starts and ends its separate stretches.  Both the twin and the device take this.

NFC is skipped on text already in NFC (``Payload.assumed``, checked by the stages around the
few characters NFC may change): agent transcripts almost always are, and the engine's
normalizer costs more than the whole GPU path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple
from unicodedata import is_normalized

import numpy as np
import numpy.typing as npt

from gpu_kernels.added_spans import AddedSpans
from gpu_kernels.char_classes import NFC_BOUNDARY, NFC_UNKNOWN, SENTINEL_POINT, CodePoints

Bytes = npt.NDArray[np.uint8]
Offsets = npt.NDArray[np.int64]
Found = tuple[Offsets, Offsets, npt.NDArray[np.int32]]
"""Begin and end (bytes) and id of each added token found in a text, in text order."""
Finder = Callable[[Mapping[bytes, int]], Callable[[bytes], Found]]
"""Builds the search for the given tokens (content -> id): leftmost-longest, as ``AddedSpans``."""

_FORMS = {"NFC", "NFD", "NFKC", "NFKD"}


class Payload(NamedTuple):
    data: bytes
    span_begin: Offsets
    span_end: Offsets
    added_ids: npt.NDArray[np.int32]
    rewritten: bool
    """The normalizer changed the text (then token extents are not the original text's)."""
    assumed: bool
    """NFC was skipped on the assumption that the text is in NFC already, as agent text almost
    always is: the stages check it (``nfc_windows``) and redo with ``normalize_all`` if not."""


class AddedSplit:
    """Splits added tokens off a text and normalizes the rest: ``payload(text)``."""

    def __init__(
        self,
        added: Mapping[str, int],
        normalizer: Any,
        normalizer_json: Any,
        *,
        finder: Finder | None = None,
    ) -> None:
        """``finder``: the added-token search to use (``SpansWithIds`` by default)."""
        self._find = (finder or SpansWithIds)({token.encode(): i for token, i in added.items()})
        self._normalizer = normalizer
        kind = (normalizer_json or {}).get("type")
        self._ascii_stable = kind in _FORMS
        self._nfc = kind == "NFC"

    def payload(
        self, text: str, *, utf8: bytes | None = None, normalize_all: bool = False
    ) -> Payload:
        """``utf8``: the text's UTF-8 when the caller has it (saves encoding it again)."""
        data = text.encode() if utf8 is None else utf8  # a lone surrogate raises, as in HF
        return self.payload_of(data, normalize_all=normalize_all)

    def payload_of(self, data: bytes, *, normalize_all: bool = False) -> Payload:
        """``payload`` of a text given as its UTF-8 alone (valid: the encoding of a ``str``)."""
        begin, end, ids = self._find(data)
        rewritten = assumed = False
        if self._normalizer is None or (self._ascii_stable and data.isascii()):
            pass  # every normal form leaves ASCII as it is
        elif self._nfc and not normalize_all:
            assumed = True
        else:
            original = data
            data, begin, end = self._normalized(data, begin, end)
            rewritten = data != original
        return Payload(data, begin, end, ids, rewritten, assumed)

    def _normalized(
        self, data: bytes, begin: Offsets, end: Offsets
    ) -> tuple[bytes, Offsets, Offsets]:
        """The data with each stretch between added tokens normalized alone; the spans moved."""
        parts: list[bytes] = []
        starts: list[int] = []
        at = size = 0
        for b, e in [*zip(begin.tolist(), end.tolist(), strict=True), (len(data), len(data))]:
            stretch = data[at:b].decode()
            part = self._normalizer.normalize_str(stretch).encode() if stretch else b""
            parts.append(part)
            size += len(part)
            if e > b:
                parts.append(data[b:e])
                starts.append(size)
                size += e - b
            at = e
        moved = np.asarray(starts, dtype=np.int64)
        return b"".join(parts), moved, moved + (end - begin)


class SpansWithIds:
    """The added-token search in Python (``AddedSpans``), each span's id looked up."""

    def __init__(self, tokens: Mapping[bytes, int]) -> None:
        self._tokens = tokens
        self._spans = AddedSpans(tokens)

    def __call__(self, data: bytes) -> Found:
        spans = self._spans.find(data)
        begin = np.asarray([b for b, _ in spans], dtype=np.int64)
        end = np.asarray([e for _, e in spans], dtype=np.int64)
        ids = np.asarray([self._tokens[data[b:e]] for b, e in spans], dtype=np.int32)
        return begin, end, ids


def nfc_windows(codes: Any, char_at: Any, size: int, xp: Any) -> tuple[Any, Any] | None:
    """Byte windows of the text to check for NFC, from each character's ``ClassTable.nfc``
    code (NumPy or CuPy arrays): around each character NFC may join to the one before, from
    the boundary before it to the boundary after (NFC normalizes such parts separately, and a
    part of boundaries alone is normalized).  None when a character is unknown to Python's
    tables: its properties, and so the check, are not to be had (normalize instead)."""
    suspects = xp.flatnonzero(codes)
    if len(suspects) == 0:
        return suspects, suspects
    if bool((codes[suspects] == NFC_UNKNOWN).any()):
        return None
    bounds = xp.flatnonzero(codes == NFC_BOUNDARY)
    byte_at = xp.concatenate((char_at, xp.asarray([size], dtype=char_at.dtype)))
    if len(bounds) == 0:
        return byte_at[:1], byte_at[-1:]
    at = xp.searchsorted(bounds, suspects, side="right")
    first = xp.where(at > 0, bounds[xp.maximum(at - 1, 0)], 0)
    last = xp.where(at < len(bounds), bounds[xp.minimum(at, len(bounds) - 1)], len(char_at))
    return byte_at[first], byte_at[last]


def windows_normalized(data: bytes, begin: Offsets, end: Offsets) -> bool:
    """Whether every window ``data[b:e]`` is in NFC, by Python's ``unicodedata``: the engine's
    answer too for characters Python has (Unicode's normalization stability policy).  Context
    from outside a stretch (an added token's own bytes) can only make a window fail, never pass.

    One check of the windows joined by newlines, not one per window: NFC joins a newline to
    nothing on either side, so it normalizes the joined text window by window, and that is the
    joined text only if each window is its own NFC (the first that is not would differ from it
    or be a proper prefix or extension of it, and a text canonically equivalent to another
    cannot be: their decompositions agree, length included)."""
    return is_normalized("NFC", joined_windows(data, begin, end).decode())


def joined_windows(data: bytes, begin: Offsets, end: Offsets) -> bytes:
    """The windows ``data[b:e]`` joined by newlines, gathered at once (a text in decomposed
    Vietnamese has a window every few characters: a slice per window cost more than the
    normalizing)."""
    if len(begin) == 0:
        return b""
    return gathered(data + b"\n", *joined_ranges(len(data), begin, end))


def joined_ranges(size: int, begin: Offsets, end: Offsets) -> tuple[Offsets, Offsets]:
    """(starts, lengths) of the windows of a text of ``size`` bytes, a newline between each
    two, in the text with a newline appended (at least one window)."""
    starts = np.full(2 * len(begin) - 1, size, dtype=np.int64)
    lengths = np.ones(len(starts), dtype=np.int64)
    starts[::2], lengths[::2] = begin, np.asarray(end) - begin
    return starts, lengths


def gathered(source: bytes, starts: Offsets, lengths: Offsets) -> bytes:
    """``source[s:s + n]`` for each start and length, concatenated."""
    before = np.cumsum(lengths) - lengths  # where each range begins in the result
    shift = np.repeat(np.asarray(starts, dtype=np.int64) - before, lengths)
    at = np.arange(len(shift), dtype=np.int64) + shift
    found: bytes = np.frombuffer(source, dtype=np.uint8)[at].tobytes()
    return found


def marked(payload: Payload) -> Bytes:
    """The payload's bytes with each added-token span marked (NumPy twin of ``mark_spans``)."""
    out = np.frombuffer(payload.data, dtype=np.uint8).copy()
    for begin, end in zip(payload.span_begin.tolist(), payload.span_end.tolist(), strict=True):
        out[begin] = 0xFF
        out[begin + 1 : end] = 0x80
    return out


def decode(data: Bytes) -> tuple[CodePoints, Offsets]:
    """(code points, first byte of each character) of marked UTF-8 (twin of ``decode_utf8``)."""
    char_at = np.flatnonzero((data & 0xC0) != 0x80)
    last = len(data) - 1
    lead = data[char_at].astype(np.uint32)

    def tail(k: int) -> npt.NDArray[np.uint32]:
        return (data[np.minimum(char_at + k, last)] & 0x3F).astype(np.uint32)

    two = ((lead & 0x1F) << 6) | tail(1)
    three = ((lead & 0x0F) << 12) | (tail(1) << 6) | tail(2)
    four = ((lead & 0x07) << 18) | (tail(1) << 12) | (tail(2) << 6) | tail(3)
    points = np.select(
        [lead == 0xFF, lead < 0x80, lead < 0xE0, lead < 0xF0],
        [np.full_like(lead, SENTINEL_POINT), lead, two, three],
        four,
    )
    return points.astype(np.uint32), char_at
