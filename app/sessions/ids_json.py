"""Token ids as JSON text, re-serialised only where they changed.

A 1M-character transcript is ~250K ids; ``orjson`` needs ~2.5 ms to write them and
``ndarray.tolist`` far more, on every call.  Consecutive calls of a session share almost all
ids, so ``IdsJson.spliced`` copies the JSON bytes of the stretches the session tokenizer
copied from the previous ids (or, without word of those, of the common prefix and suffix) and
writes only the ids in between.  Each id's end offset in the text is kept to cut the bytes at
token edges.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from app.memos import Memos
from app.tokenization.growable import Growable
from app.tokenization.reference import CopiedIds, IdArray

_POWERS = np.array([10**k for k in range(1, 10)], dtype=np.int64)
Offsets = npt.NDArray[np.signedinteger[Any]]
"""Byte offsets into the JSON text: int32 (half the copying), int64 past 2^27 ids."""
Bytes = npt.NDArray[np.uint8]
"""JSON text as bytes in an array (the form growable buffers hold)."""


class IdsJson:
    """``text`` is ``b"id,id,...,id"`` (no brackets, read-only) for ``ids``; ``ends[i]`` is
    where id i's digits end in it.  Both grow in place (see ``growable``): a splice that keeps
    the previous call's JSON from the start writes only what follows."""

    __slots__ = ("_ends", "_text", "ends", "ids", "text")

    def __init__(self, ids: IdArray, text: Growable, ends: Growable) -> None:
        self.ids = ids
        self._text, self._ends = text, ends
        self.text: memoryview = text.views[0].data
        self.ends: Offsets = ends.views[0]

    @property
    def nbytes(self) -> int:
        return self._text.nbytes + self.ids.nbytes + self._ends.nbytes

    @classmethod
    def of(cls, ids: IdArray) -> IdsJson:
        """Serialise from scratch."""
        text, ends = _serialise(ids)
        return cls(ids, Growable.of((text,)), Growable.of((ends,)))

    def spliced(self, ids: IdArray, copied: CopiedIds | None = None) -> IdsJson:
        """The JSON of ``ids``, reusing this one's bytes where ids were kept: the stretches
        ``copied`` names when they were copied from this one's ids, else the common prefix
        and suffix."""
        if ids is self.ids:
            return self
        if copied is not None and copied.source is self.ids:
            runs = copied.runs
        else:
            runs = self._common_ends(ids)
        reused = sum(last - first for first, last, _ in runs)
        if reused < len(ids) // 8 or self.ends.dtype != _offset_type(len(ids)):
            return IdsJson.of(ids)
        return self._reusing(ids, runs)

    def _common_ends(self, ids: IdArray) -> tuple[tuple[int, int, int], ...]:
        """The common prefix and suffix of this one's ids and ``ids``, as copied runs."""
        old, new = self.ids, ids
        n_old, n_new = len(old), len(new)
        shortest = min(n_old, n_new)
        head = _common_run(old[:shortest], new[:shortest])
        tail = _common_run(
            old[n_old - shortest + head :][::-1], new[n_new - shortest + head :][::-1]
        )
        return tuple(
            run for run in ((0, head, 0), (n_old - tail, n_old, n_new - tail)) if run[0] < run[1]
        )

    def _reusing(self, ids: IdArray, runs: tuple[tuple[int, int, int], ...]) -> IdsJson:
        wide = self.ends.dtype.type
        # A first run that starts both id lists stays where it is: only what follows is written.
        kept = runs[0][1] if runs and runs[0][0] == runs[0][2] == 0 else 0
        text_kept = size = int(self.ends[kept - 1]) if kept else 0
        whole = self._text.views[0]
        pieces: list[Bytes] = []
        ends: list[Offsets] = []

        def add(text: Bytes, text_ends: Offsets, start: int) -> None:
            """Append ``text``, whose ids end at ``text_ends`` (counted from ``start``)."""
            nonlocal size
            if size:
                pieces.append(_COMMA)
                size += 1
            pieces.append(text)
            ends.append(text_ends.astype(wide, copy=False) + (size - start))
            size += len(text)

        cursor = kept
        for first, last, at in runs[1:] if kept else runs:
            if at > cursor:
                add(*_serialise(ids[cursor:at]), 0)
            start = int(self.ends[first - 1]) + 1 if first else 0
            add(whole[start : int(self.ends[last - 1])], self.ends[first:last], start)
            cursor = at + last - first
        if cursor < len(ids):
            add(*_serialise(ids[cursor:]), 0)
        return IdsJson(
            ids, self._text.extended(text_kept, [pieces]), self._ends.extended(kept, [ends])
        )


_EMPTY_ENDS = np.zeros(0, dtype=np.int32)
_COMMA = np.frombuffer(b",", dtype=np.uint8)


_AT_ONCE = 1 << 18
"""Ids serialised by one ``orjson.dumps``: a call holds the GIL (~10 ns an id), and the event
loop waits while any thread holds it."""


def _serialise(ids: IdArray) -> tuple[Bytes, Offsets]:
    if not len(ids):
        return np.zeros(0, dtype=np.uint8), _EMPTY_ENDS
    wide = _offset_type(len(ids))
    texts: list[Bytes] = []
    ends: list[Offsets] = []
    at = 0  # where the slice's text starts
    for k in range(0, len(ids), _AT_ONCE):
        part = ids[k : k + _AT_ONCE]
        text = orjson.dumps(part, option=orjson.OPT_SERIALIZE_NUMPY)
        digits = np.searchsorted(_POWERS, part, side="right").astype(wide) + 1
        ends.append(np.cumsum(digits + 1, dtype=wide) - 1 + wide(at))
        texts += [_COMMA, np.frombuffer(text, dtype=np.uint8)[1:-1]]
        at += len(text) - 1  # its digits and commas, and the comma after it
    return np.concatenate(texts[1:]), np.concatenate(ends)


def _offset_type(n_ids: int) -> type[np.signedinteger[Any]]:
    """int32 offsets while the JSON surely fits (2^27 ids of <= 11 bytes < 2^31), else int64."""
    return np.int32 if n_ids < 1 << 27 else np.int64


def _common_run(a: IdArray, b: IdArray) -> int:
    """Length of the common prefix of two equally long arrays."""
    differ = np.flatnonzero(a != b)
    return int(differ[0]) if len(differ) else len(a)


class IdsJsonCache:
    """The last ``IdsJson`` of each session (kept in ``memos``); thread-safe."""

    def __init__(self, memos: Memos[IdsJson]) -> None:
        self._entries = memos

    def json_for(self, key: str | None, ids: IdArray, copied: CopiedIds | None = None) -> IdsJson:
        """JSON of ``ids``, spliced from the session's previous call when there is one
        (``copied``: which of its ids were copied from earlier ones)."""
        previous = self._entries.get(key) if key is not None else None
        current = previous.spliced(ids, copied) if previous is not None else IdsJson.of(ids)
        if key is not None:
            self._entries.put(key, current, current.nbytes)
        return current
