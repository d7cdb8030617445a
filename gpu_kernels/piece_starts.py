"""The piece-start predicate of the cl100k / Llama-3 / Qwen2-3 split pattern, as array operations.

The pattern (``app.tokenization.spec.CL100K_PATTERN``; Qwen2 has ``\\p{N}`` for
``\\p{N}{1,3}``) never needs backtracking beyond a run, so
whether character i starts a piece depends only on its class, its offset in its run of equal
classes, a bounded look-back and a few facts of the runs around it (PRETOKENIZER-RULES.md):

* digits start at offsets 0, 3, 6, ... of their run (Qwen2: every digit);
* punctuation (``'`` or other) starts unless it follows punctuation or U+0020;
* the first letter of a run starts unless it follows ``\\s`` other than a newline, or a
  punctuation run of length 1 that does not follow U+0020 (that character is its prefix);
  after a ``'`` that starts, a case-insensitive contraction ends a piece inside the run;
* punctuation absorbs the newlines that open the whitespace run after it; the rest of a
  whitespace run [a', b) starts at a', after its last newline t, and hands its last character
  to the next piece (``\\s+(?!\\S)``) when b < n and b-1 > t.

Every fact is a shifted comparison or a segmented scan (``maximum.accumulate`` over run
starts), one kernel launch each on the GPU; nothing loops over characters.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from gpu_kernels.char_classes import AP, CONTRACTION_LETTERS, NL, SP, WS, ClassCodes, L, N

Flags = npt.NDArray[np.bool_]
Indices = npt.NDArray[np.int64]

_FOLD = {letter: code for code, letter in enumerate(CONTRACTION_LETTERS, start=1)}
_ONE_LETTER = [_FOLD[c] for c in "stmd"]  # 's 't 'm 'd
_TWO_LETTERS = [(_FOLD[a], _FOLD[b]) for a, b in ("re", "ve", "ll")]


Shifted = TypeVar("Shifted", ClassCodes, Flags)


def _shift(values: Shifted, by: int, fill: int) -> Shifted:
    """``values[i - by]``, ``fill`` where that falls before the text."""
    out = np.full_like(values, fill)
    out[by:] = values[: len(values) - by]
    return out


def _run_starts(mask: Flags) -> Indices:
    """For each position, the start of the maximal run of ``mask`` holding it (a prefix max)."""
    index = np.arange(len(mask))
    begins = mask.copy()
    begins[1:] &= ~mask[:-1]
    return np.maximum.accumulate(np.where(begins | ~mask, index, 0))


def piece_starts(classes: ClassCodes, folds: ClassCodes, *, digits_per_piece: int) -> Flags:
    """True where a piece starts; ``digits_per_piece`` is 3 for cl100k / Llama-3, 1 for Qwen2."""
    n = len(classes)
    starts = np.zeros(n, dtype=bool)
    if n == 0:
        return starts
    index = np.arange(n)
    none = 255  # class of the characters before the text: equals no class code
    prev = _shift(classes, 1, none)
    prev2 = _shift(classes, 2, none)
    is_space = classes <= WS
    is_punct = classes >= AP
    prev_punct = _shift(is_punct, 1, False)

    digit = classes == N
    starts |= digit & ((index - _run_starts(digit)) % digits_per_piece == 0)
    starts |= is_punct & ~prev_punct & (prev != SP)

    # A punctuation run of length 1 before position i is a prefix of the letters at i unless a
    # U+0020 joined it; a `'` so placed is where contractions are tried.
    lone_punct = prev_punct & ~_shift(is_punct, 2, False)
    prefixed = lone_punct & (prev2 != SP)
    letter = classes == L
    run_first = letter & (prev != L)
    starts |= run_first & ~((prev == SP) | (prev == WS) | prefixed)

    apostrophe = np.zeros(n, dtype=bool)  # position i follows a `'` that starts a piece
    apostrophe[1:] = (classes[:-1] == AP) & prefixed[1:]
    fold1, fold2 = _shift(folds, 1, 0), _shift(folds, 2, 0)
    after_one = letter & (prev == L) & _shift(apostrophe & run_first, 1, False)
    starts |= after_one & np.isin(fold1, _ONE_LETTER)
    after_two = letter & (prev == L) & (prev2 == L) & _shift(apostrophe & run_first, 2, False)
    two = np.zeros(n, dtype=bool)
    for first, second in _TWO_LETTERS:
        two |= (fold2 == first) & (fold1 == second)
    starts |= after_two & two

    _whitespace_starts(classes, is_space, is_punct, starts)
    starts[0] = True
    return starts


def _whitespace_starts(
    classes: ClassCodes, is_space: Flags, is_punct: Flags, starts: Flags
) -> None:
    """Mark the starts inside whitespace runs (see the module docstring)."""
    n = len(classes)
    edges = np.diff(is_space.astype(np.int8), prepend=0, append=0)
    run_begin = np.flatnonzero(edges == 1)
    run_end = np.flatnonzero(edges == -1)  # exclusive
    if len(run_begin) == 0:
        return
    newline = classes == NL
    index = np.arange(n)
    # End of the newline stretch at each position: the first non-newline at or after it.
    next_other = np.minimum.accumulate(np.where(newline, n, index)[::-1])[::-1]
    absorbs = np.zeros(len(run_begin), dtype=bool)
    has_prev = run_begin > 0
    absorbs[has_prev] = is_punct[run_begin[has_prev] - 1]
    first = np.where(absorbs, np.minimum(next_other[run_begin], run_end), run_begin)
    last_newline = np.maximum.accumulate(np.where(newline, index, -1))[run_end - 1]
    after_newline = np.maximum(last_newline + 1, first)
    live = first < run_end
    starts[first[live]] = True
    tail = after_newline < run_end
    starts[after_newline[tail]] = True
    hand = (run_end < n) & (run_end - 1 > after_newline)
    starts[run_end[hand] - 1] = True


def piece_bounds(starts: Flags) -> tuple[Indices, Indices]:
    """Compaction: (begin, end) character offsets of each piece, from the start flags."""
    begin = np.flatnonzero(starts)
    end = np.append(begin[1:], len(starts))
    return begin, end
