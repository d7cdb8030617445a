"""Byte-level BPE on the GPU, one thread per piece (the short-piece tier of the issue).

Each thread runs HF's merge order on its own piece: find the lowest-rank adjacent pair
(leftmost among equals; ranks looked up by binary search in the sorted pair keys held in
device memory), merge it, repeat.  That is O(length^2 log merges) per piece, right for the
short pieces that dominate text; warp and block tiers for long pieces are not written yet.
The whole-word lookup of ``ignore_merges`` vocabularies stays on the host (``MergeTable``).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from gpu_kernels.byte_bpe import IdArray, MergeTable

_THREADS = 128

SOURCE = r"""
extern "C" __global__ void bpe_per_piece(
    int* tokens, const long long* begin, const long long* end, const long long pieces,
    const long long* keys, const long long* ranks, const int* merged, const long long merges,
    const long long width, int* counts)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= pieces) return;
    int* t = tokens + begin[p];
    long long length = end[p] - begin[p];
    while (length > 1) {
        long long best_rank = 0x7fffffffffffffffLL;
        long long best_at = -1;
        long long best_slot = -1;
        for (long long j = 0; j + 1 < length; ++j) {
            long long key = (long long)t[j] * width + t[j + 1];
            long long low = 0, high = merges;  /* first slot with keys[slot] >= key */
            while (low < high) {
                long long mid = (low + high) / 2;
                if (keys[mid] < key) low = mid + 1; else high = mid;
            }
            if (low < merges && keys[low] == key && ranks[low] < best_rank) {
                best_rank = ranks[low];
                best_at = j;
                best_slot = low;
            }
        }
        if (best_at < 0) break;
        t[best_at] = merged[best_slot];
        for (long long j = best_at + 1; j + 1 < length; ++j) t[j] = t[j + 1];
        --length;
    }
    counts[p] = (int)length;
}
"""


def merge_on_device(table: MergeTable, pieces: Sequence[bytes]) -> list[IdArray]:
    """``table.merge(pieces)`` computed on the GPU (host bytes in, host ids out)."""
    if not pieces:
        return []
    cupy: Any = importlib.import_module("cupy")
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    end = np.cumsum(lengths)
    begin = end - lengths
    tokens = cupy.asarray(table.byte_ids[np.frombuffer(b"".join(pieces), dtype=np.uint8)])
    counts = cupy.zeros(len(pieces), dtype=cupy.int32)
    kernel = cupy.RawKernel(SOURCE, "bpe_per_piece")  # compiled once, cached by CuPy
    kernel(
        ((len(pieces) + _THREADS - 1) // _THREADS,),
        (_THREADS,),
        (
            tokens, cupy.asarray(begin), cupy.asarray(end), np.int64(len(pieces)),
            cupy.asarray(table.pair_keys), cupy.asarray(table.pair_ranks),
            cupy.asarray(table.pair_merged), np.int64(len(table.pair_keys)),
            np.int64(table.width), counts,
        ),
    )  # fmt: skip
    host_tokens, host_counts = cupy.asnumpy(tokens), cupy.asnumpy(counts)
    return [host_tokens[b : b + c] for b, c in zip(begin, host_counts, strict=True)]
