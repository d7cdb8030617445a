"""The NFC of a text as the reference normalizes it, and its tokens' ends in the original.

NFC splits a text before every character it never joins to the one before (``ClassTable.nfc``:
NFC_BOUNDARY) into parts it normalizes one by one, so the normalized text is the original with
the few parts NFC changes replaced (``payload.nfc_windows`` finds them, and the C part the
same way: each window reaches from the boundary before a character NFC may change to the
boundary after; Python's ``unicodedata`` normalizes each as the engine does, for every
character it has: Unicode's stability policy).  A token that ends where a window ends, or
outside every window, ends at the same place in the original text, shifted by what the
windows before it gained or lost; one that ends inside a changed window has no such place
(the reference's offsets put it somewhere in the window's characters), so then there is no
answer and the caller takes the reference.
"""

from __future__ import annotations

import operator
from typing import NamedTuple
from unicodedata import normalize

import numpy as np
import numpy.typing as npt

from app.tokenization.native._native import compared_lines, gather
from gpu_kernels.payload import Payload, joined_ranges

_Offsets = npt.NDArray[np.int64]


class Alignment(NamedTuple):
    """The changed windows: ``begin``/``end`` in the normalized bytes, ``gained`` the bytes
    NFC added (negative: removed) up to and including each."""

    begin: _Offsets
    end: _Offsets
    gained: _Offsets

    def moves(self) -> bytes:
        """The windows as the C part moves the tokens' ends back by them (``survey_ends``):
        (begin, end, gained) per window, int64.  A token that ends at or after a window's end
        moves by what the windows up to it gained; one that ends inside a window has no
        place in the original."""
        return np.stack(self).T.astype(np.int64).tobytes()


def normalized(raw: Payload, begin: _Offsets, end: _Offsets) -> tuple[Payload, Alignment] | None:
    """``raw`` (a payload, its stretches as they are) with every stretch in NFC, and how the
    two line up, from the windows [begin, end) where NFC may change it; None when a window
    touches an added token (the reference normalizes each stretch alone) and NFC changes one.
    ``raw`` itself (not ``rewritten``) when NFC changes no window."""
    news = _each_normalized(raw.data, begin, end)
    changed = news.changed
    if not changed.any():
        return raw, Alignment(begin[:0], end[:0], begin[:0])
    after = np.searchsorted(raw.span_end, begin, side="right")  # each's first span ending after
    listed = after < len(raw.span_begin)
    if np.any(raw.span_begin[after[listed]] < end[listed]):  # it begins inside the window
        return None
    grown = news.length[changed]
    old_begin, old_end = begin[changed], end[changed]
    delta = grown - (old_end - old_begin)
    gained = np.cumsum(delta)
    starts, stops = old_begin + gained - delta, old_end + gained
    alignment = Alignment(starts, stops, gained)
    # The text's gaps between the changed windows and the windows' NFC alternate.
    ranges, lengths = np.empty(2 * len(grown) + 1, np.int64), np.empty(2 * len(grown) + 1, np.int64)
    ranges[0::2] = np.concatenate(([0], old_end))
    lengths[0::2] = np.concatenate((old_begin, [len(raw.data)])) - ranges[0::2]
    ranges[1::2], lengths[1::2] = len(raw.data) + news.begin[changed], grown
    data = gather(raw.data + news.text, ranges, lengths)
    # Spans lie outside every window: each moves by what the windows before it gained.
    before = np.searchsorted(alignment.end - alignment.gained, raw.span_begin, side="right")
    moved = np.where(before > 0, alignment.gained[np.maximum(before - 1, 0)], 0)
    payload = Payload(
        data, raw.span_begin + moved, raw.span_end + moved, raw.added_ids,
        rewritten=True, assumed=False,
    )  # fmt: skip
    return payload, alignment


class _Windows(NamedTuple):
    """The windows' NFC: window i's is ``text[begin[i]:begin[i] + length[i]]``, and
    ``changed[i]`` whether it differs from the window."""

    changed: npt.NDArray[np.bool_]
    text: bytes
    begin: _Offsets
    length: _Offsets


def _each_normalized(data: bytes, begin: _Offsets, end: _Offsets) -> _Windows:
    """Each window's NFC, from one ``normalize`` of the windows joined by newlines, not one
    per window: a newline is a character NFC neither joins to its neighbours nor moves a mark
    across, so the joined text normalizes window by window, and each window's NFC keeps its
    own newlines (NFC makes and takes none), which tell where each one ends."""
    if len(begin) == 0:
        return _Windows(np.zeros(0, bool), b"", begin, begin)
    joined = gather(data + b"\n", *joined_ranges(len(data), begin, end))
    new_joined = normalize("NFC", joined.decode()).encode()
    paired = compared_lines(joined, new_joined)
    if paired is not None and len(paired[0]) == len(begin):  # no window holds a newline
        changed, new_begin, new_length = paired
        return _Windows(
            np.frombuffer(changed, dtype=bool), new_joined,
            np.frombuffer(new_begin, dtype=np.int64), np.frombuffer(new_length, dtype=np.int64),
        )  # fmt: skip
    new_lines = new_joined.split(b"\n")
    windows = [data[b:e] for b, e in zip(begin.tolist(), end.tolist(), strict=True)]
    news, at = [], 0
    for window in windows:
        count = window.count(b"\n") + 1
        news.append(b"\n".join(new_lines[at : at + count]))
        at += count
    length = np.fromiter(map(len, news), dtype=np.int64, count=len(news))
    return _Windows(
        np.fromiter(map(operator.ne, news, windows), dtype=bool, count=len(news)),
        b"".join(news), np.cumsum(length) - length, length,
    )  # fmt: skip
