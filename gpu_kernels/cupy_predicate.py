"""The cl100k-family piece-start predicate on the GPU: one RawKernel plus the shared run scans.

The per-character rules of ``piece_starts.cl100k_starts`` (digits, punctuation, first letters,
contraction ends) are one thread per character reading at most four characters back; the
run-level facts (digit offsets, whitespace-run starts) are ``run_scans`` on CuPy arrays, the
same code the twin runs on NumPy.  Tested against the twin where a GPU exists
(``tests/gpu_kernels/test_cupy_predicate.py``); CuPy is imported only when called.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from gpu_kernels.char_classes import AP, SP, WS, ClassCodes, L, N
from gpu_kernels.piece_starts import ONE_LETTER_CONTRACTIONS, TWO_LETTER_CONTRACTIONS, Flags
from gpu_kernels.run_scans import run_offsets, whitespace_starts

_THREADS = 256

SOURCE = (
    f"#define C_SP {SP}\n#define C_WS {WS}\n#define C_L {L}\n#define C_N {N}\n#define C_AP {AP}\n"
    "#define C_NONE 255\n"
    "__device__ __forceinline__ bool is_one(int f) { return "
    + " || ".join(f"f == {code}" for code in ONE_LETTER_CONTRACTIONS)
    + "; }\n"
    "__device__ __forceinline__ bool is_two(int f, int g) { return "
    + " || ".join(f"(f == {a} && g == {b})" for a, b in TWO_LETTER_CONTRACTIONS)
    + "; }\n"
    + r"""
__device__ __forceinline__ int at(const unsigned char* cls, long long i) {
    return i >= 0 ? cls[i] : C_NONE;
}
__device__ __forceinline__ bool punct(int c) { return c >= C_AP && c != C_NONE; }
/* A punctuation run of length 1 ends at j - 1 and no U+0020 joined it: a prefix of j. */
__device__ __forceinline__ bool prefixed(const unsigned char* cls, long long j) {
    return punct(at(cls, j - 1)) && !punct(at(cls, j - 2)) && at(cls, j - 2) != C_SP;
}
/* j is the first letter of a run right after a ' that starts a piece. */
__device__ __forceinline__ bool opens(const unsigned char* cls, long long j) {
    return j >= 1 && cls[j] == C_L && cls[j - 1] == C_AP && prefixed(cls, j);
}
extern "C" __global__ void cl100k_local_starts(
    const unsigned char* cls, const unsigned char* fold, const long long* digit_offset,
    const int digits_per_piece, const long long n, bool* starts)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int c = cls[i];
    int p1 = at(cls, i - 1);
    bool start = false;
    if (c == C_N) {
        start = digit_offset[i] % digits_per_piece == 0;
    } else if (punct(c)) {
        start = !punct(p1) && p1 != C_SP;
    } else if (c == C_L && p1 != C_L) {
        start = !(p1 == C_SP || p1 == C_WS || prefixed(cls, i));
    }
    if (i >= 1 && opens(cls, i - 1) && is_one(fold[i - 1])) start = true;
    if (i >= 2 && opens(cls, i - 2) && is_two(fold[i - 2], fold[i - 1])) start = true;
    if (start) starts[i] = true;
}
"""
)


def cl100k_starts_on_device(
    classes: ClassCodes, folds: ClassCodes, *, digits_per_piece: int
) -> Flags:
    """``piece_starts.cl100k_starts`` computed on the GPU (host arrays in and out)."""
    cupy: Any = importlib.import_module("cupy")
    n = len(classes)
    if n == 0:
        return np.zeros(0, dtype=bool)
    device_classes = cupy.asarray(classes)
    device_folds = cupy.asarray(folds)
    offsets = cupy.ascontiguousarray(run_offsets(device_classes == N, cupy), dtype=cupy.int64)
    starts = cupy.zeros(n, dtype=cupy.bool_)
    kernel = cupy.RawKernel(SOURCE, "cl100k_local_starts")  # compiled once, cached by CuPy
    blocks = (n + _THREADS - 1) // _THREADS
    kernel(
        (blocks,),
        (_THREADS,),
        (device_classes, device_folds, offsets, np.int32(digits_per_piece), np.int64(n), starts),
    )
    whitespace_starts(device_classes, starts, cupy)
    starts[0] = True
    result: Flags = cupy.asnumpy(starts)
    return result
