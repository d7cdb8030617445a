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
    LOWER,
    MARK,
    NL,
    NO_KIND,
    OTHER_LETTER,
    SENT,
    SENTINEL_POINT,
    SP,
    UPPER,
    WS,
    L,
    N,
    P,
)
from gpu_kernels.piece_starts import (
    CONTRACTION,
    DIGITS,
    LOWER_PART,
    NEW,
    ONE_LETTER_CONTRACTIONS,
    PUNCT,
    SLASH,
    SPACE,
    STATES,
    STRETCH,
    TWO_LETTER_CONTRACTIONS,
    UPPER_PART,
)
from gpu_kernels.whole_words import FNV_OFFSET, FNV_PRIME

SHORT_MAX = 32
"""The thread tier's longest piece (bytes); longer pieces go to ``bpe_long``."""
WARP_MAX = 1024
"""The warp tier's longest piece: ``bpe_long`` with 32 lanes; longer: BLOCK_LANES lanes."""
BLOCK_LANES = 256
NO_RANK = 0x7FFFFFFF

_DEFINES = {
    "C_NL": NL, "C_SP": SP, "C_WS": WS, "C_L": L, "C_N": N, "C_AP": AP, "C_P": P, "C_SENT": SENT,
    "K_NONE": NO_KIND, "K_UPPER": UPPER, "K_LOWER": LOWER, "K_OTHER": OTHER_LETTER,
    "K_MARK": MARK, "SLASH": f"{SLASH}u", "STATES": STATES, "S_NEW": NEW, "S_DIGITS": DIGITS,
    "S_UPPER_PART": UPPER_PART, "S_LOWER_PART": LOWER_PART, "S_CONTRACTION": CONTRACTION,
    "S_PUNCT": PUNCT, "S_STRETCH": STRETCH, "S_SPACE": SPACE,
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


OPTIONS = ("--std=c++17",)
"""NVRTC options of ``module()`` (CuPy adds the device's architecture); CI compiles with the
same ones for sm_90 (H200) and sm_80, no GPU needed (``tests/gpu_kernels/test_nvrtc.py``)."""


@functools.cache
def module() -> Any:
    """The compiled ``cupy.RawModule`` (NVRTC, once per process)."""
    cupy: Any = importlib.import_module("cupy")
    return cupy.RawModule(code=SOURCE, options=OPTIONS)
