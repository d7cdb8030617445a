"""The NFC of a text as the reference normalizes it, and its tokens' ends in the original.

NFC splits a text before every character it never joins to the one before (``ClassTable.nfc``:
NFC_BOUNDARY) into parts it normalizes one by one, so the normalized text is the original with
the few parts NFC changes replaced (``payload.nfc_windows`` finds them: each window reaches
from the boundary before a character NFC may change to the boundary after; Python's
``unicodedata`` normalizes each as the engine does, for every character it has: Unicode's
stability policy).  A token that ends where a window ends, or outside every window, ends at
the same place in the original text, shifted by what the windows before it gained or lost;
one that ends inside a changed window has no such place (the reference's offsets put it
somewhere in the window's characters), so then there is no answer and the caller takes the
reference.
"""

from __future__ import annotations

from typing import NamedTuple
from unicodedata import normalize

import numpy as np
import numpy.typing as npt

from app.tokenization.reference import OffsetArray, char_to_byte_offsets
from gpu_kernels.char_classes import BLOCK_BITS, BLOCKS, ClassTable, code_points
from gpu_kernels.payload import Payload, nfc_windows

_Offsets = npt.NDArray[np.int64]


class Alignment(NamedTuple):
    """The changed windows: ``begin``/``end`` in the normalized bytes, ``gained`` the bytes
    NFC added (negative: removed) up to and including each."""

    begin: _Offsets
    end: _Offsets
    gained: _Offsets

    def original_ends(self, ends: OffsetArray) -> OffsetArray | None:
        """``ends`` (in the normalized bytes) moved to the original's; None when one of them
        falls inside a changed window."""
        if not len(self.begin):
            return ends
        at = np.maximum(np.searchsorted(self.begin, ends, side="right") - 1, 0)
        begin, end = self.begin[at], self.end[at]
        if np.any((ends > begin) & (ends < end)):
            return None
        done = np.where(ends >= end, at + 1, at)  # windows wholly at or before each end
        shift = np.where(done > 0, self.gained[np.maximum(done - 1, 0)], 0)
        moved: OffsetArray = (ends - shift).astype(np.int32)
        return moved


def normalized(text: str, raw: Payload, classes: ClassTable) -> tuple[Payload, Alignment] | None:
    """``raw`` (the text's payload, its stretches as they are) with every stretch in NFC, and
    how it lines up with ``raw``; None when that cannot be told here (a character Python's
    tables do not have, or a window touching an added token: the reference normalizes each
    stretch alone)."""
    points = code_points(text)
    touched = np.bincount(points >> BLOCK_BITS, minlength=BLOCKS)
    classes.ensure(np.flatnonzero(touched))
    char_at = char_to_byte_offsets(text)[:-1].astype(np.int64)
    windows = nfc_windows(classes.nfc[points], char_at, len(raw.data), np)
    if windows is None:
        return None
    data = raw.data
    parts: list[bytes] = []
    begin: list[int] = []
    end: list[int] = []
    gained: list[int] = []
    at = total = 0
    span_begin = raw.span_begin.tolist()
    for a, b in sorted(set(zip(windows[0].tolist(), windows[1].tolist(), strict=True))):
        k = int(np.searchsorted(raw.span_end, a, side="right"))  # the first span ending after a
        if a < at or (k < len(span_begin) and span_begin[k] < b):
            return None
        new = normalize("NFC", data[a:b].decode()).encode()
        if new == data[a:b]:
            continue
        parts += [data[at:a], new]
        begin.append(a + total)
        total += len(new) - (b - a)
        end.append(b + total)
        gained.append(total)
        at = b
    parts.append(data[at:])
    alignment = Alignment(*(np.asarray(x, dtype=np.int64) for x in (begin, end, gained)))
    # Spans lie outside every window: each moves by what the windows before it gained.
    before = np.searchsorted(alignment.end - alignment.gained, raw.span_begin, side="right")
    moved = np.where(before > 0, alignment.gained[np.maximum(before - 1, 0)], 0)
    payload = Payload(
        b"".join(parts), raw.span_begin + moved, raw.span_end + moved, raw.added_ids,
        rewritten=bool(begin), assumed=False,
    )  # fmt: skip
    return payload, alignment
