"""The text as the device receives it: UTF-8 bytes plus the byte spans of its added tokens.

Added tokens are split first, leftmost-longest on the raw text, as the reference does; the
stretches between them go through the normalizer (each alone, as in the reference) and the
tokens keep their own bytes.  The stages then mark each span (``marked``: its first byte
becomes 0xFF, which UTF-8 never contains, the rest continuation bytes) so the span decodes as
one sentinel character: one pass over the whole text, with the sentinels standing where the
reference starts and ends its separate stretches.  Both the twin and the device take this.

Normal forms (NFC and kin) are skipped on text already normalized (see ``Payload.assumed``):
agent transcripts almost always are, and the engine's normalizer costs more than the GPU.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple
from unicodedata import is_normalized

import numpy as np
import numpy.typing as npt

from gpu_kernels.char_classes import SENTINEL_POINT, CodePoints

Bytes = npt.NDArray[np.uint8]
Offsets = npt.NDArray[np.int64]

_FORMS = {"NFC", "NFD", "NFKC", "NFKD"}


class Payload(NamedTuple):
    data: bytes
    span_begin: Offsets
    span_end: Offsets
    added_ids: npt.NDArray[np.int32]
    rewritten: bool
    """The normalizer changed the text (then token extents are not the original text's)."""
    assumed: bool
    """Normalization was skipped because Python's ``unicodedata`` finds the text already in
    its normal form.  By Unicode's normalization stability policy that holds for the engine's
    (newer) Unicode too, provided every character is assigned in Python's version: the
    stages check that (``ClassTable.unassigned``) and redo with ``normalize_all`` if not."""


class AddedSplit:
    """Splits added tokens off a text and normalizes the rest: ``payload(text)``."""

    def __init__(self, added: Mapping[str, int], normalizer: Any, normalizer_json: Any) -> None:
        self._added = {token.encode(): i for token, i in added.items()}
        longest_first = sorted(self._added, key=len, reverse=True)
        self._split = re.compile(b"|".join(map(re.escape, longest_first))) if added else None
        self._normalizer = normalizer
        kind = (normalizer_json or {}).get("type")
        self._form: Any = kind if kind in _FORMS else None

    def payload(self, text: str, *, normalize_all: bool = False) -> Payload:
        data = text.encode()  # a lone surrogate raises, as in the reference
        spans = [m.span() for m in self._split.finditer(data)] if self._split else []
        rewritten = assumed = False
        if self._normalizer is None:
            pass
        elif self._form is not None and text.isascii():
            pass  # every normal form leaves ASCII as it is
        elif self._form is not None and not normalize_all and is_normalized(self._form, text):
            assumed = True  # each stretch is a substring of a normalized text: normalized
        else:
            original = data
            data, spans = self._normalized(data, spans)
            rewritten = data != original
        begin = np.asarray([b for b, _ in spans], dtype=np.int64)
        end = np.asarray([e for _, e in spans], dtype=np.int64)
        ids = np.asarray([self._added[data[b:e]] for b, e in spans], dtype=np.int32)
        return Payload(data, begin, end, ids, rewritten, assumed)

    def _normalized(
        self, data: bytes, spans: list[tuple[int, int]]
    ) -> tuple[bytes, list[tuple[int, int]]]:
        parts: list[bytes] = []
        moved: list[tuple[int, int]] = []
        at = size = 0
        for begin, end in [*spans, (len(data), len(data))]:
            stretch = data[at:begin].decode()
            part = self._normalizer.normalize_str(stretch).encode() if stretch else b""
            parts.append(part)
            size += len(part)
            if end > begin:
                parts.append(data[begin:end])
                moved.append((size, size + end - begin))
                size += end - begin
            at = end
        return b"".join(parts), moved


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
