"""Piece-start predicates of the split patterns, as array operations (cl100k family; GPT-2).

The cl100k pattern (``app.tokenization.spec.CL100K_PATTERN``; Qwen2 has ``\\p{N}`` for
``\\p{N}{1,3}``) never needs backtracking beyond a run, so whether character i starts a piece
depends only on its class, its offset in its run of equal classes, a bounded look-back and a
few facts of the runs around it (PRETOKENIZER-RULES.md):

* digits start at offsets 0, 3, 6, ... of their run (Qwen2: every digit);
* punctuation (``'`` or other) starts unless it follows punctuation or U+0020;
* the first letter of a run starts unless it follows ``\\s`` other than a newline, or a
  punctuation run of length 1 that does not follow U+0020 (that character is its prefix);
  after a ``'`` that starts, a case-insensitive contraction ends a piece inside the run;
* punctuation absorbs the newlines that open the whitespace run after it; the rest of a
  whitespace run [a', b) starts at a', after its last newline t, and hands its last character
  to the next piece (``\\s+(?!\\S)``) when b < n and b-1 > t.

Every fact is a shifted comparison (one thread per character on the GPU, ``cupy_predicate``)
or a run scan (``run_scans``, shared with the device); nothing loops over characters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from gpu_kernels.char_classes import (
    AP,
    CONTRACTION_LETTERS,
    SENT,
    SP,
    WS,
    ClassCodes,
    CodePoints,
    L,
    N,
)
from gpu_kernels.run_scans import gpt2_whitespace_starts, run_offsets, whitespace_starts

Flags = npt.NDArray[np.bool_]
Indices = npt.NDArray[np.int64]

_FOLD = {letter: code for code, letter in enumerate(CONTRACTION_LETTERS, start=1)}
ONE_LETTER_CONTRACTIONS = tuple(_FOLD[c] for c in "stmd")  # 's 't 'm 'd (fold codes)
TWO_LETTER_CONTRACTIONS = tuple((_FOLD[a], _FOLD[b]) for a, b in ("re", "ve", "ll"))
_LOWER = b"\0" + CONTRACTION_LETTERS.encode()  # fold code -> the lowercase ASCII letter


Shifted = TypeVar("Shifted", ClassCodes, Flags)


def _shift(values: Shifted, by: int, fill: int) -> Shifted:
    """``values[i - by]``, ``fill`` where that falls before the text."""
    out = np.full_like(values, fill)
    out[by:] = values[: len(values) - by]
    return out


def cl100k_starts(classes: ClassCodes, folds: ClassCodes, *, digits_per_piece: int) -> Flags:
    """True where a piece starts; ``digits_per_piece`` is 3 for cl100k / Llama-3, 1 for Qwen2."""
    n = len(classes)
    starts = np.zeros(n, dtype=bool)
    if n == 0:
        return starts
    prev = _shift(classes, 1, SENT)
    prev2 = _shift(classes, 2, SENT)
    is_punct = (classes >= AP) & (classes != SENT)
    prev_punct = _shift(is_punct, 1, False)

    starts |= classes == SENT
    digit = classes == N
    starts |= digit & (run_offsets(digit, np) % digits_per_piece == 0)
    starts |= is_punct & ~prev_punct & (prev != SP)

    # A punctuation run of length 1 before position i is a prefix of the letters at i unless a
    # U+0020 joined it; a `'` so placed is where contractions are tried.
    lone_punct = prev_punct & ~_shift(is_punct, 2, False)
    prefixed = lone_punct & (prev2 != SP)
    letter = classes == L
    run_first = letter & (prev != L)
    starts |= run_first & ~((prev == SP) | (prev == WS) | prefixed)
    cuts, _ = _contractions(folds, run_first & (prev == AP) & prefixed)
    starts |= cuts

    whitespace_starts(classes, starts, np)
    starts[0] = True
    return starts


def gpt2_starts(classes: ClassCodes, folds: ClassCodes, points: CodePoints) -> Flags:
    """True where a GPT-2 ``ByteLevel`` regex piece starts.

    ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``:
    a run of letters, digits or punctuation starts unless U+0020 precedes it (that space is its
    prefix); a `'` that starts a piece ends it after a lowercase contraction, if one follows;
    a whitespace run [a, b) starts at a and hands b-1 to the next piece unless b ends the
    text or a stretch (an added token's sentinel).
    """
    n = len(classes)
    if n == 0:
        return np.zeros(0, dtype=bool)
    prev = _shift(classes, 1, SENT)
    is_punct = (classes >= AP) & (classes != SENT)
    prev_punct = _shift(is_punct, 1, False)
    letter, digit = classes == L, classes == N
    run_first = (letter & (prev != L)) | (digit & (prev != N)) | (is_punct & ~prev_punct)
    starts: Flags = (run_first & (prev != SP)) | (classes == SENT)
    apostrophe_starts = _shift(starts & (classes == AP), 1, False)
    cuts, matched = _contractions(exact_folds(points, folds), letter & apostrophe_starts)
    starts &= ~matched
    starts |= cuts
    gpt2_whitespace_starts(classes, starts, np)
    starts[0] = True
    return starts


def exact_folds(points: CodePoints, folds: ClassCodes) -> ClassCodes:
    """The folds where the character is the lowercase ASCII letter itself (GPT-2 matches
    contractions case-sensitively)."""
    exact: ClassCodes = np.where(points == np.frombuffer(_LOWER, np.uint8)[folds], folds, 0)
    return exact.astype(np.uint8)


def _contractions(folds: ClassCodes, opens: Flags) -> tuple[Flags, Flags]:
    """Contractions tried at the letters ``opens`` (each right after a `'` that starts a piece).

    Returns (cuts, matched): cuts where a matched contraction ends (a piece starts there in
    any case), and matched at the ``opens`` where one matched.
    """
    following = np.zeros_like(folds)
    following[:-1] = folds[1:]
    one = opens & np.isin(folds, ONE_LETTER_CONTRACTIONS)
    two = np.zeros_like(opens)
    for first, second in TWO_LETTER_CONTRACTIONS:
        two |= opens & (folds == first) & (following == second)
    cuts = _shift(one, 1, False) | _shift(two, 2, False)
    return cuts, one | two


Predicate = Callable[[ClassCodes, ClassCodes, CodePoints], Flags]
"""(classes, folds, code points) -> piece-start flags."""

DIGITS_PER_PIECE: Mapping[str, int] = {"cl100k": 3, "qwen2": 1}
"""The cl100k-like families: ``\\p{N}{1,3}`` or (Qwen2) ``\\p{N}``."""

PREDICATES: Mapping[str, Predicate] = {
    "cl100k": lambda classes, folds, _: cl100k_starts(classes, folds, digits_per_piece=3),
    "qwen2": lambda classes, folds, _: cl100k_starts(classes, folds, digits_per_piece=1),
    "gpt2": gpt2_starts,
}
"""The covered pre-tokenizer families, by their ``app.tokenization.spec`` names."""


def piece_bounds(starts: Flags) -> tuple[Indices, Indices]:
    """Compaction: (begin, end) character offsets of each piece, from the start flags."""
    begin = np.flatnonzero(starts)
    end = np.append(begin[1:], len(starts))
    return begin, end
