"""Token ids as JSON text, re-serialised only where they changed.

A 1M-character transcript is ~250K ids; ``orjson`` needs ~2.5 ms to write them and
``ndarray.tolist`` far more, on every call.  Consecutive calls of a session share almost all
ids (a long common prefix, and after an edit near the start a long common suffix), so
``IdsJson.spliced`` copies the JSON bytes of the shared prefix and suffix and writes only the
ids in between.  Each id's end offset in the text is kept to cut the bytes at token edges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from app.tokenization.lru import LruCache
from app.tokenization.reference import IdArray

_POWERS = np.array([10**k for k in range(1, 10)], dtype=np.int64)
Offsets = npt.NDArray[np.signedinteger[Any]]
"""Byte offsets into the JSON text: int32 (half the copying), int64 past 2^27 ids."""


@dataclass(frozen=True, slots=True)
class IdsJson:
    """``text`` is ``b"id,id,...,id"`` (no brackets) for ``ids``; ``ends[i]`` is where id i's
    digits end in it."""

    ids: IdArray
    text: bytes
    ends: Offsets

    @property
    def nbytes(self) -> int:
        return len(self.text) + self.ids.nbytes + self.ends.nbytes

    @classmethod
    def of(cls, ids: IdArray) -> IdsJson:
        """Serialise from scratch."""
        text, ends = _serialise(ids)
        return cls(ids, text, ends)

    def spliced(self, ids: IdArray) -> IdsJson:
        """The JSON of ``ids``, reusing this one's bytes for the common prefix and suffix."""
        old, new = self.ids, ids
        n_old, n_new = len(old), len(new)
        shortest = min(n_old, n_new)
        head = _common_run(old[:shortest], new[:shortest])
        tail = _common_run(
            old[n_old - shortest + head :][::-1], new[n_new - shortest + head :][::-1]
        )
        if head + tail < shortest // 8:
            return IdsJson.of(ids)
        mid_text, mid_ends = _serialise(new[head : n_new - tail])
        whole = memoryview(self.text)  # slices of it are joined without an extra copy
        pieces: list[bytes | memoryview] = []
        ends: list[Offsets] = []
        size = 0
        wide = _offset_type(n_new)
        if head:
            pieces.append(whole[: self.ends[head - 1]])
            ends.append(self.ends[:head].astype(wide, copy=False))
            size = int(self.ends[head - 1])
        first = n_old - tail
        start = int(self.ends[first - 1]) + 1 if 0 < first < n_old else 0
        suffix = (whole[start:], self.ends[first:], start) if first < n_old else (b"", None, 0)
        for text, piece_ends, offset in ((mid_text, mid_ends, 0), suffix):
            if not len(text) or piece_ends is None:
                continue
            if pieces:
                pieces.append(b",")
                size += 1
            pieces.append(text)
            ends.append(piece_ends.astype(wide, copy=False) + (size - offset))
            size += len(text)
        return IdsJson(ids, b"".join(pieces), np.concatenate(ends) if ends else _EMPTY_ENDS)


_EMPTY_ENDS = np.zeros(0, dtype=np.int32)


def _serialise(ids: IdArray) -> tuple[bytes, Offsets]:
    if not len(ids):
        return b"", _EMPTY_ENDS
    text = orjson.dumps(ids, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
    wide = _offset_type(len(ids))
    digits = np.searchsorted(_POWERS, ids, side="right").astype(wide) + 1
    ends: Offsets = np.cumsum(digits + 1, dtype=wide) - 1
    return text, ends


def _offset_type(n_ids: int) -> type[np.signedinteger[Any]]:
    """int32 offsets while the JSON surely fits (2^27 ids of <= 11 bytes < 2^31), else int64."""
    return np.int32 if n_ids < 1 << 27 else np.int64


def _common_run(a: IdArray, b: IdArray) -> int:
    """Length of the common prefix of two equally long arrays."""
    differ = np.flatnonzero(a != b)
    return int(differ[0]) if len(differ) else len(a)


class IdsJsonCache:
    """The last ``IdsJson`` of each session, LRU within a byte budget; thread-safe."""

    def __init__(self, max_bytes: int) -> None:
        self._entries: LruCache[str, IdsJson] = LruCache(max_bytes)

    def json_for(self, key: str | None, ids: IdArray) -> IdsJson:
        """JSON of ``ids``, spliced from the session's previous call when there is one."""
        previous = self._entries.get(key) if key is not None else None
        current = previous.spliced(ids) if previous is not None else IdsJson.of(ids)
        if key is not None:
            self._entries.put(key, current, current.nbytes)
        return current

    def stats(self) -> dict[str, int]:
        stats = self._entries.stats()
        return {"sessions": stats["entries"], "bytes": stats["bytes"]}
