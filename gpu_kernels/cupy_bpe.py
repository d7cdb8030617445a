"""Byte-level BPE on the device, specialised by piece length.

* thread tier (``bpe_short``): a thread per piece of up to ``SHORT_MAX`` bytes, in registers;
* warp tier (``bpe_long``, 32 lanes): pieces up to ``WARP_MAX`` bytes, a warp per piece;
* block tier (``bpe_long``, ``BLOCK_LANES`` lanes): longer pieces, a block per piece.

Each runs HF's merge order (lowest rank, leftmost among equals) with the ranks found in a hash
table of the merges held in device memory (``MergeTable.pair_slots``); ``whole_words`` first
settles added tokens, one-byte pieces and (``ignore_merges``) pieces that are vocabulary words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gpu_kernels.backend import Backend, default_backend, per_item
from gpu_kernels.byte_bpe import IdArray, MergeTable
from gpu_kernels.cuda_source import BLOCK_LANES, SHORT_MAX, WARP_MAX


class DeviceMerges:
    """A merge table in device memory and the tier launches over it."""

    def __init__(self, backend: Backend, table: MergeTable) -> None:
        self._backend = backend
        xp = backend.xp
        self.byte_ids = xp.asarray(table.byte_ids)
        slots = table.pair_slots()
        self._table = (
            xp.asarray(slots.keys), xp.asarray(slots.ranks), xp.asarray(slots.merged),
            np.int64(slots.shift), np.int64(slots.mask), np.int64(table.width),
        )  # fmt: skip

    def merge(self, tokens: Any, begin: Any, end: Any, done: Any, counts: Any) -> None:
        """Merge every piece not ``done`` in place; ``counts`` gets each one's id count."""
        backend, xp = self._backend, self._backend.xp
        pieces = len(begin)
        per_item(backend, "bpe_short", pieces, tokens, begin, end, np.int64(pieces), done,
                 *self._table, counts)  # fmt: skip
        lengths = end - begin
        longer = (lengths > SHORT_MAX) & (done == 0)
        for listed, lanes in (
            (xp.flatnonzero(longer & (lengths <= WARP_MAX)), 32),
            (xp.flatnonzero(longer & (lengths > WARP_MAX)), BLOCK_LANES),
        ):
            if len(listed) == 0:
                continue
            sizes = lengths[listed]
            scratch_at = xp.cumsum(sizes) - sizes
            scratch = [xp.empty(int(sizes.sum()), dtype=xp.int32) for _ in range(4)]
            args = (tokens, begin, end, listed, scratch_at, np.int64(len(listed)), *scratch,
                    *self._table, counts)  # fmt: skip
            backend.launch("bpe_long", len(listed), lanes, args)


def merge_on_device(
    table: MergeTable, pieces: Sequence[bytes], backend: Backend | None = None
) -> list[IdArray]:
    """``table.merge(pieces)`` computed by the tier kernels (host bytes in, host ids out)."""
    if not pieces:
        return []
    backend = default_backend(backend)
    xp = backend.xp
    merges = DeviceMerges(backend, table)
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    end = np.cumsum(lengths)
    begin = end - lengths
    tokens = merges.byte_ids[xp.asarray(np.frombuffer(b"".join(pieces), dtype=np.uint8))]
    counts = xp.asarray(lengths.astype(np.int32))
    done = xp.zeros(len(pieces), dtype=xp.uint8)
    merges.merge(tokens, xp.asarray(begin), xp.asarray(end), done, counts)
    host_tokens, host_counts = backend.to_host(tokens), backend.to_host(counts)
    return [host_tokens[b : b + c] for b, c in zip(begin, host_counts, strict=True)]
