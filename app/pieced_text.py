"""A text kept as the pieces it was produced in, joined only where a ``str`` is needed.

A session's rendered prompt is a megabyte that differs from the previous call's in a few
pieces: the ones appended, the generation prompt they replace, an edited one near the start
(Claude Code's billing line), and the chat template's memo renders the rest from the very same
piece objects as last time.  Joining it costs ~0.5 ms per call, encoding it to UTF-8 and
comparing it with the previous text more.  ``EncodedPieces`` instead builds the next prompt's
UTF-8 from the previous one's, piece by piece: a piece equal to the previous text's piece at
the same position has the same bytes there (``is`` settles nearly all of them without reading
a character, and the unchanged start is found by tuple comparisons in C), and only the other
pieces are encoded.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Ends = npt.NDArray[np.int64]
"""Where each piece's UTF-8 ends in the whole text's UTF-8."""

_MAX_CHANGED = 256
"""Pieces that differ from the piece at the same position, at most; beyond that the texts are
not related piece by piece (a message inserted mid-transcript shifts all after it)."""


class PiecedText:
    """The text ``"".join(pieces)``, immutable (the pieces are copied into a tuple)."""

    __slots__ = ("pieces",)

    def __init__(self, pieces: Iterable[str]) -> None:
        self.pieces = tuple(pieces)

    def text(self) -> str:
        """The whole text (a copy of every character: callers keep it while they need it)."""
        return "".join(self.pieces)

    def tail(self, chars: int) -> str:
        """The last ``chars`` characters (fewer when the text is shorter)."""
        out: list[str] = []
        need = chars
        for piece in reversed(self.pieces):
            if need <= 0:
                break
            out.append(piece[-need:] if len(piece) > need else piece)
            need -= len(piece)
        return "".join(reversed(out))


@dataclass(frozen=True, slots=True)
class EncodedPieces:
    """A pieced text whose UTF-8 is known, and where each piece's bytes end in it."""

    text: PiecedText
    ends: Ends
    nbytes: int
    """Memory its pieces hold (``sys.getsizeof`` of each), kept by difference."""

    @classmethod
    def measured(cls, text: PiecedText) -> tuple[bytes, EncodedPieces]:
        """(UTF-8 of ``text``, ``text`` encoded), every piece encoded: a cold call's cost.
        Raises ``UnicodeEncodeError`` for a piece that is not valid Unicode."""
        encoded = [piece.encode("utf-8") for piece in text.pieces]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        nbytes = sum(map(sys.getsizeof, text.pieces))
        return b"".join(encoded), cls(text, np.cumsum(lengths), nbytes)

    def successor(self, new: PiecedText, utf8: bytes) -> tuple[bytes, int, EncodedPieces] | None:
        """(UTF-8 of ``new``, a length of leading bytes it shares with ``utf8``, ``new``
        encoded), where ``utf8`` is this text's UTF-8, built from it wherever a piece of
        ``new`` equals the piece at the same position here; None when too many positions
        differ.  Raises ``UnicodeEncodeError`` for a new piece that is not valid Unicode."""
        old, fresh = self.text.pieces, new.pieces
        k = equal_prefix(fresh, old)  # usually all but the last few pieces, found in C
        n = min(len(old), len(fresh))
        changed: list[int] = []
        for i in range(k, n):
            if fresh[i] is not old[i] and fresh[i] != old[i]:
                changed.append(i)
                if len(changed) > _MAX_CHANGED:
                    return None
        changed += range(n, len(fresh))
        encoded = {i: fresh[i].encode("utf-8") for i in changed}
        lengths = np.empty(len(fresh) - k, dtype=np.int64)  # of the pieces from k on
        lengths[: n - k] = np.diff(self.ends[k:n], prepend=self._start(k))
        for i, data in encoded.items():
            lengths[i - k] = len(data)
        ends = np.concatenate((self.ends[:k], self._start(k) + np.cumsum(lengths)))
        parts: list[bytes | memoryview] = []
        view, piece = memoryview(utf8), 0  # pieces [piece, i) are the same as here
        for i in [*changed, len(fresh)]:
            if i > piece:
                parts.append(view[self._start(piece) : self.ends[i - 1]])
            if i < len(fresh):
                parts.append(encoded[i])
            piece = i + 1
        shared = self._start(changed[0] if changed else len(fresh))
        replaced = [old[i] for i in changed if i < len(old)] + list(old[len(fresh) :])
        nbytes = self.nbytes + sum(map(sys.getsizeof, (fresh[i] for i in changed)))
        nbytes -= sum(map(sys.getsizeof, replaced))
        return b"".join(parts), shared, EncodedPieces(new, ends, nbytes)

    def _start(self, piece: int) -> int:
        return int(self.ends[piece - 1]) if piece else 0


def equal_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading items of ``a`` and ``b`` (two tuples or two lists) are equal.  Their
    ``==`` compares in C and checks identity first, so unchanged pieces (the same objects) are
    not even read; the search gallops back from the end, where a session's prompts differ,
    then bisects."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi, step = 0, n, 1  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - step > lo:
        if a[: hi - step] == b[: hi - step]:
            lo = hi - step
            break
        hi -= step
        step *= 2
    while hi - lo > 1:
        m = (lo + hi) // 2
        if a[:m] == b[:m]:
            lo = m
        else:
            hi = m
    return lo


_SLICE = 1 << 16
"""Characters of a long ``str`` encoded at a time by ``write_utf8``."""


def write_utf8(text: str | PiecedText, out: bytearray) -> None:
    """Makes ``out`` the UTF-8 of ``text``, in place, piece by piece (a long ``str`` in
    slices of ``_SLICE`` characters): no joined copy of the text, whose megabytes on fresh
    pages (four bytes a character once one piece is wider than Latin-1) cost ~1-6 ms per
    1M-character prompt, while ``out`` is a buffer reused from call to call.  Raises
    ``UnicodeEncodeError`` for a piece that is not valid Unicode."""
    parts: Iterable[str] = (
        text.pieces
        if isinstance(text, PiecedText)
        else (text[i : i + _SLICE] for i in range(0, len(text), _SLICE))
    )
    at = 0
    for part in parts:
        data = part.encode("utf-8")
        end = at + len(data)
        out[at:end] = data  # in place while ``out`` is long enough, else it grows
        at = end
    del out[at:]


def joined(text: str | PiecedText) -> str:
    """``text`` as one ``str``."""
    return text if isinstance(text, str) else text.text()
