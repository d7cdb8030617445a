"""The NumPy twin of the GPU cold-start path: the same array stages, runnable on any machine.

Stages, each a separate function so a kernel can replace it and be tested against it: added
tokens split first and the stretches normalized (``payload``), the spans marked and the UTF-8
decoded (one sentinel character per added token), class lookup, the piece-start predicate,
compaction into pieces, then byte-level BPE per distinct piece (with a piece cache) and a
gather back into text order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tokenizers import Tokenizer

from gpu_kernels.byte_bpe import IdArray, MergeTable
from gpu_kernels.char_classes import ClassTable, CodePoints
from gpu_kernels.payload import (
    Bytes,
    Offsets,
    Payload,
    decode,
    marked,
    nfc_windows,
    windows_normalized,
)
from gpu_kernels.piece_starts import PREDICATES, Predicate, piece_bounds
from gpu_kernels.plan import EncoderPlan

MergeStage = Callable[[MergeTable, Sequence[bytes]], list[IdArray]]
"""(table, distinct pieces) -> each piece's ids after all merges."""


class Pieces(NamedTuple):
    """The marked bytes and each piece's byte span; a piece opening with 0xFF is an added
    token, the i-th such piece is ``added_ids[i]``."""

    data: Bytes
    begin: Offsets
    end: Offsets
    added_ids: IdArray


class TwinEncoder:
    """``encode(text)`` equals ``Tokenizer.encode(text, add_special_tokens=False).ids``."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        classes: ClassTable | None = None,
        cache_bytes: int = 64 << 20,
        predicate: Predicate | None = None,
        merge: MergeStage | None = None,
    ) -> None:
        """``predicate`` and ``merge`` replace the NumPy stages (with kernels built for tests)."""
        self.plan = EncoderPlan(tokenizer, classes)
        self._predicate = predicate or PREDICATES[self.plan.family]
        self._merge = merge or MergeTable.merge
        self._cache: dict[bytes, IdArray] = {}
        self._cache_bytes = cache_bytes
        self._cached = 0

    @classmethod
    def from_file(cls, path: str | Path) -> TwinEncoder:
        return cls(Tokenizer.from_file(str(path)))

    def pieces(self, text: str) -> Pieces:
        payload = self.plan.split.payload(text)
        data = marked(payload)
        points, char_at = decode(data)
        if payload.assumed and not _nfc_holds(self.plan, payload, points, char_at):
            payload = self.plan.split.payload(text, normalize_all=True)
            data = marked(payload)
            points, char_at = decode(data)
        first, last = piece_bounds(self._predicate(self.plan.classes.lookup(points), points))
        byte_at = np.append(char_at, len(data))
        return Pieces(data, byte_at[first], byte_at[last], payload.added_ids)

    def encode(self, text: str) -> IdArray:
        data, begin, end, added_ids = self.pieces(text)
        if len(begin) == 0:
            return np.zeros(0, dtype=np.int32)
        raw = data.tobytes()
        added = data[begin] == 0xFF
        plain = np.flatnonzero(~added)
        distinct: dict[bytes, int] = {}
        which = np.empty(len(begin), dtype=np.int64)
        which[plain] = [
            distinct.setdefault(raw[a:b], len(distinct))
            for a, b in zip(begin[plain].tolist(), end[plain].tolist(), strict=True)
        ]
        ids = self._ids_of(list(distinct))
        which[added] = len(ids) + np.arange(len(added_ids))
        ids += [np.asarray([i], dtype=np.int32) for i in added_ids.tolist()]
        return gather(ids, which)

    def _ids_of(self, pieces: list[bytes]) -> list[IdArray]:
        """Ids of distinct pieces: cache, whole-word lookup, else batched BPE merge rounds."""
        merges = self.plan.merges
        out: list[IdArray | None] = [self._cache.get(p) for p in pieces]
        todo: list[int] = []
        for i, piece in enumerate(pieces):
            if out[i] is None:
                whole = merges.whole_word(piece)
                if whole is None:
                    todo.append(i)
                else:
                    out[i] = np.asarray([whole], dtype=np.int32)
        for i, merged in zip(todo, self._merge(merges, [pieces[i] for i in todo]), strict=True):
            out[i] = merged
        result: list[IdArray] = []
        for piece, ids in zip(pieces, out, strict=True):
            assert ids is not None
            if piece not in self._cache:
                self._remember(piece, ids)
            result.append(ids)
        return result

    def _remember(self, piece: bytes, ids: IdArray) -> None:
        """Caches a piece's ids; a cache that would outgrow ``cache_bytes`` is emptied first
        (the twin is a test oracle and a benchmark: no eviction order is worth keeping)."""
        size = len(piece) + ids.nbytes + 64
        if self._cached + size > self._cache_bytes:
            self._cache.clear()
            self._cached = 0
        if size <= self._cache_bytes:
            self._cache[piece] = ids
            self._cached += size


def _nfc_holds(plan: EncoderPlan, payload: Payload, points: CodePoints, char_at: Offsets) -> bool:
    windows = nfc_windows(plan.classes.nfc_codes(points), char_at, len(payload.data), np)
    return windows is not None and windows_normalized(payload.data, *windows)


def gather(ids: list[IdArray], which: np.ndarray) -> IdArray:
    """Concatenate ``ids[which[0]], ids[which[1]], ...`` with one vectorised gather."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    flat = np.concatenate(ids)
    counts = lengths[which]
    total = int(counts.sum())
    first_out = np.cumsum(counts) - counts
    index = np.repeat(offsets[which] - first_out, counts) + np.arange(total)
    return flat[index]
