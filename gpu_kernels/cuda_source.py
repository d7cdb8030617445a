"""The CUDA source of every device stage (``kernels.cu``) with its constants, and its module.

The constants (class codes, contraction folds, tier sizes) are written from the Python ones,
so the twin and the kernels cannot disagree on them.  ``module()`` compiles with NVRTC once
per process (CuPy imported only then); the tests also build the same source for the host.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import Any

from gpu_kernels.byte_bpe import PAIR_HASH
from gpu_kernels.char_classes import (
    AP,
    BLOCK_BITS,
    CONTRACTION_LETTERS,
    SENT,
    SENTINEL_POINT,
    SP,
    WS,
    L,
    N,
)
from gpu_kernels.piece_starts import ONE_LETTER_CONTRACTIONS, TWO_LETTER_CONTRACTIONS
from gpu_kernels.whole_words import FNV_OFFSET, FNV_PRIME

SHORT_MAX = 32
"""The thread tier's longest piece (bytes); longer pieces go to ``bpe_long``."""
WARP_MAX = 1024
"""The warp tier's longest piece: ``bpe_long`` with 32 lanes; longer: BLOCK_LANES lanes."""
BLOCK_LANES = 256
NO_RANK = 0x7FFFFFFF

_DEFINES = {
    "C_SP": SP, "C_WS": WS, "C_L": L, "C_N": N, "C_AP": AP, "C_SENT": SENT,
    "SENTINEL_POINT": f"{SENTINEL_POINT:#x}u", "BLOCK_BITS": BLOCK_BITS,
    "SHORT_MAX": SHORT_MAX, "NO_RANK": NO_RANK,
    "FNV_OFFSET": f"{FNV_OFFSET:#x}ull", "FNV_PRIME": f"{FNV_PRIME:#x}ull",
    "FOLD_LETTERS": '"\\0' + CONTRACTION_LETTERS + '"', "PAIR_HASH": f"{PAIR_HASH:#x}ull",
}  # fmt: skip


def _contraction_tests() -> str:
    one = " || ".join(f"f == {code}" for code in ONE_LETTER_CONTRACTIONS)
    two = " || ".join(f"(f == {a} && g == {b})" for a, b in TWO_LETTER_CONTRACTIONS)
    return (
        f"__device__ __forceinline__ bool is_one(int f) {{ return {one}; }}\n"
        f"__device__ __forceinline__ bool is_two(int f, int g) {{ return {two}; }}\n"
    )


SOURCE = (
    "".join(f"#define {name} {value}\n" for name, value in _DEFINES.items())
    + _contraction_tests()
    + (Path(__file__).with_name("kernels.cu")).read_text(encoding="utf-8")
)


@functools.cache
def module() -> Any:
    """The compiled ``cupy.RawModule`` (NVRTC, once per process)."""
    cupy: Any = importlib.import_module("cupy")
    return cupy.RawModule(code=SOURCE, options=("--std=c++17",))
