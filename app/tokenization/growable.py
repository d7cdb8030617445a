"""Parallel arrays (a session's ids and token ends) that grow at their end without copying
what they keep.

A continuation call's ids are the previous call's, give or take the last few, plus a few
hundred new ones; concatenating a million-element array for that costs more than encoding
the new text.  ``Growable`` keeps the arrays at the start of writable buffers with room after
them and hands out read-only views of that filled prefix; ``extended`` writes the new values
after the view and returns a longer view of the same buffers: O(new values), not O(all).

Views handed out never change, so writing in place is allowed only where no view reaches:
past the end of the extended one, and only once per ``Growable`` (the first extension claims
the room after it; another extension of the same arrays, say a concurrent call of the same
session, copies).  Values the new arrays hold at positions the old view covers must equal the
old view's there (compared, not assumed); otherwise, or without room, the arrays are copied
into fresh buffers with room to spare.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]
Pieces = Sequence[Array]
"""One array's new values, as consecutive pieces (written in turn, never joined first)."""

_ROOM_FRACTION = 4  # room for a quarter more values: amortized O(1) copies per value
_MIN_ROOM = 256


class Growable:
    """Equally long arrays at the start of buffers with room after them; immutable views."""

    __slots__ = ("_buffers", "_claim", "_views", "length")

    def __init__(self, buffers: tuple[Array, ...], length: int) -> None:
        self._buffers = buffers
        self.length = length
        self._claim = threading.Lock()  # acquired once, never released: the room is taken
        views = tuple(buffer[:length] for buffer in buffers)
        for view in views:
            view.flags.writeable = False
        self._views = views

    @classmethod
    def of(cls, heads: Sequence[Array], tails: Sequence[Pieces] | None = None) -> Growable:
        """Fresh buffers holding each head followed by its tail pieces (one copy of each)."""
        tails = tails if tails is not None else [()] * len(heads)
        length = len(heads[0]) + sum(len(piece) for piece in tails[0])
        capacity = _capacity(length)
        buffers = []
        for head, pieces in zip(heads, tails, strict=True):
            buffer = np.empty(capacity, dtype=head.dtype)
            buffer[: len(head)] = head
            _write(buffer, len(head), pieces)
            buffers.append(buffer)
        return cls(tuple(buffers), length)

    @property
    def views(self) -> tuple[Array, ...]:
        """The arrays: read-only views of the buffers' filled prefix."""
        return self._views

    @property
    def nbytes(self) -> int:
        """Memory held: the whole buffers, room included."""
        return sum(buffer.nbytes for buffer in self._buffers)

    def extended(self, keep: int, tails: Sequence[Pieces]) -> Growable:
        """The arrays' first ``keep`` values followed by ``tails`` (pieces per array): in the
        same buffers when the room after these arrays is free and big enough and the new
        values agree with these arrays wherever both have one, else copied."""
        n = self.length
        length = keep + sum(len(piece) for piece in tails[0])
        columns = tuple(zip(self._buffers, tails, strict=True))
        if (
            keep <= n <= length <= len(self._buffers[0])
            and all(_agrees(buffer[keep:n], pieces) for buffer, pieces in columns)
            and self._claim.acquire(blocking=False)
        ):
            for buffer, pieces in columns:
                _write(buffer, keep, pieces, start=n - keep)
            return Growable(self._buffers, length)
        return Growable.of([view[:keep] for view in self._views], tails)


def _capacity(length: int) -> int:
    """Room for a quarter more values, rounded up to one of eight sizes per doubling.

    A session's arrays grow a little every call, and the previous call's buffers are alive
    while the new ones are made: with sizes exact to the value, each new buffer is a little
    larger than any the heap has freed, so it is carved from memory not used before (after a
    heap trim, pages the kernel faults in again: ~300 per call for a 1M-character session's id
    JSON).  Rounded, successive calls ask for the same size until they outgrow it, and the
    buffers the call before last freed fit."""
    wanted = length + max(length // _ROOM_FRACTION, _MIN_ROOM)
    step = 1 << max(wanted.bit_length() - 4, 0)
    return -(-wanted // step) * step


def _write(buffer: Array, at: int, pieces: Pieces, *, start: int = 0) -> None:
    """Write the pieces' values from their ``start``-th on into ``buffer`` at ``at + start``."""
    offset = 0
    for piece in pieces:
        lo = max(start - offset, 0)
        if lo < len(piece):
            buffer[at + offset + lo : at + offset + len(piece)] = piece[lo:]
        offset += len(piece)


def _agrees(values: Array, pieces: Pieces) -> bool:
    """Whether the pieces, joined, start with ``values``."""
    offset = 0
    for piece in pieces:
        if offset >= len(values):
            return True
        part = piece[: len(values) - offset]
        if not _equal(values[offset : offset + len(part)], part):
            return False
        offset += len(part)
    return offset >= len(values)


def _equal(a: Array, b: Array) -> bool:
    """``np.array_equal`` of two 1-D arrays of equal length; their bytes when the dtypes agree
    (the usual case: a few values, where ``array_equal``'s own overhead dominates)."""
    if a.dtype == b.dtype:
        return a.tobytes() == b.tobytes()
    return bool(np.array_equal(a, b))
