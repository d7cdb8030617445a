"""Piece-start predicates of the split patterns, as array operations (cl100k family; GPT-2;
o200k).

The cl100k pattern (``app.tokenizer_spec.CL100K_PATTERN``; Qwen2 has ``\\p{N}`` for
``\\p{N}{1,3}``) never needs backtracking beyond a run, so whether character i starts a piece
depends only on its class, its offset in its run of equal classes, a bounded look-back and a
few facts of the runs around it (docs/design.md#llama-3-and-cl100k_base-cl100k):

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
o200k's starts are not local; they come from a scan over per-character transfer functions
(``o200k_transfers``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from gpu_kernels.char_classes import (
    AP,
    CONTRACTION_LETTERS,
    LOWER,
    MARK,
    NL,
    NO_KIND,
    OTHER_LETTER,
    SENT,
    SP,
    UPPER,
    WS,
    CharCodes,
    ClassCodes,
    CodePoints,
    L,
    N,
    P,
)
from gpu_kernels.deepseek_starts import deepseek_starts
from gpu_kernels.run_scans import (
    case_run_facts,
    gpt2_whitespace_starts,
    run_offsets,
    scan_states,
    shift,
    whitespace_starts,
)

Flags = npt.NDArray[np.bool_]
Indices = npt.NDArray[np.int64]

_FOLD = {letter: code for code, letter in enumerate(CONTRACTION_LETTERS, start=1)}
ONE_LETTER_CONTRACTIONS = tuple(_FOLD[c] for c in "stmd")  # 's 't 'm 'd (fold codes)
TWO_LETTER_CONTRACTIONS = tuple((_FOLD[a], _FOLD[b]) for a, b in ("re", "ve", "ll"))
_LOWER = b"\0" + CONTRACTION_LETTERS.encode()  # fold code -> the lowercase ASCII letter


Shifted = TypeVar("Shifted", ClassCodes, Flags, CodePoints)


def _shift(values: Shifted, by: int, fill: int) -> Shifted:
    """``run_scans.shift`` on NumPy arrays."""
    out: Shifted = shift(values, by, fill, np)
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


def contraction_letters(folds: ClassCodes) -> ClassCodes:
    """How many letters of a contraction start at each character (0, 1 or 2), were a `'`
    before it (case-insensitive: the fold codes)."""
    following = np.zeros_like(folds)
    following[:-1] = folds[1:]
    two = np.zeros(len(folds), dtype=bool)
    for first, second in TWO_LETTER_CONTRACTIONS:
        two |= (folds == first) & (following == second)
    letters: ClassCodes = np.where(two, 2, np.isin(folds, ONE_LETTER_CONTRACTIONS)).astype(np.uint8)
    return letters


def _contractions(folds: ClassCodes, opens: Flags) -> tuple[Flags, Flags]:
    """Contractions tried at the letters ``opens`` (each right after a `'` that starts a piece).

    Returns (cuts, matched): cuts where a matched contraction ends (a piece starts there in
    any case), and matched at the ``opens`` where one matched.
    """
    letters = np.where(opens, contraction_letters(folds), 0)
    cuts = _shift(letters == 1, 1, False) | _shift(letters == 2, 2, False)
    return cuts, letters > 0


# o200k's states (``o200k_transfers``): what the piece holding a character is doing there.
NEW, DIGITS, UPPER_PART, LOWER_PART, CONTRACTION, PUNCT, STRETCH, SPACE = range(8)
STATES = 8
UPPER_CLASS = (UPPER, OTHER_LETTER, MARK)
LOWER_CLASS = (LOWER, OTHER_LETTER, MARK)
SLASH = ord("/")


def o200k_starts(codes: CharCodes, points: CodePoints) -> Flags:
    """True where an o200k piece starts: where the state scan of ``o200k_transfers`` is NEW."""
    if len(points) == 0:
        return np.zeros(0, dtype=bool)
    starts: Flags = scan_states(o200k_transfers(codes, points), np) == NEW
    return starts


def o200k_transfers(codes: CharCodes, points: CodePoints) -> npt.NDArray[np.uint8]:
    """Each character's transfer function over the states: ``[p, s]`` is the state at p + 1
    when the piece holding p is in state s there (NEW: it starts at p).

    o200k's piece ends are not local (docs/design.md#o200k_base-o200k): a mark is a letter or
    punctuation, a `'` a contraction or a prefix, a `/` absorbed or not, depending on where the
    piece holding it started.  But given what that piece is doing at p, where it goes on is
    local plus ``case_run_facts``.  The pattern's alternatives, in order, from a start at p:

    * letters ``[U]*[W]+|[U]+[W]*`` (U = Lu Lt Lm Lo M, W = Ll Lm Lo M), after an optional
      prefix ``[^\\r\\n\\p{L}\\p{N}]`` (a mark at p is a letter, never a prefix): a run of U
      followed by Ll joins it; otherwise the word ends after the run's last Lm/Lo/M if it
      has one (W needs a character), else at the run's end; then a contraction, if one;
    * ``\\p{N}{1,3}``; `` ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*``: punctuation and marks, then a
      stretch of newlines and slashes;
    * whitespace as in cl100k (``whitespace_starts``), state SPACE.

    A state that cannot hold at p (UPPER_PART at a digit, say) gets NEW's transfer: so rows
    are constant wherever the state is not in doubt, which ``scan_states`` exploits.
    """
    classes, folds, kinds = codes.classes, codes.folds, codes.kinds
    ahead = _shift(classes, -1, SENT)
    after = _shift(classes, -2, SENT)
    behind = _shift(classes, 1, SENT)
    upper, lower = np.isin(kinds, UPPER_CLASS), np.isin(kinds, LOWER_CLASS)
    letter = (kinds >= UPPER) & (kinds <= MARK)
    letter_ahead = _shift(letter, -1, False)
    punct = (classes == AP) | (classes == P)
    space = classes <= WS
    apostrophe = _shift(contraction_letters(folds), -1, 0) * (classes == AP)
    """The letters of a contraction opening at each `'` (0: none)."""
    joins, last_other, newline_ahead = case_run_facts(classes, kinds, np)
    offsets = run_offsets(classes == N, np)

    letters_end = np.where(_shift(apostrophe, -1, 0) > 0, CONTRACTION, NEW)
    upper_next = np.where(
        _shift(upper, -1, False),
        np.where(joins | ~last_other, UPPER_PART, letters_end),
        np.where(_shift(kinds, -1, NO_KIND) == LOWER, LOWER_PART, letters_end),
    )
    lower_next = np.where(_shift(lower, -1, False), LOWER_PART, letters_end)
    contraction_next = np.where(
        ((behind == AP) & (_shift(apostrophe, 1, 0) == 1)) | ((classes != AP) & (behind != AP)),
        NEW,
        CONTRACTION,
    )
    digits_next = np.where((ahead == N) & (_shift(offsets, -1, 0) % 3 != 0), DIGITS, NEW)
    punct_next = np.where(_shift(punct, -1, False), PUNCT, np.where(ahead == NL, STRETCH, NEW))
    stretch_next = np.where((ahead == NL) | (_shift(points, -1, 0) == SLASH), STRETCH, NEW)
    space_ends = np.where(
        newline_ahead,
        (classes == NL) & ~_shift(newline_ahead, -1, False),
        (ahead > WS) | ((after > WS) & (after != SENT)),
    )
    space_next = np.where(space_ends, NEW, SPACE)

    new = space_next
    new = np.where(punct, punct_next, new)
    new = np.where((classes == SP) & _shift(punct, -1, False) & ~letter_ahead, PUNCT, new)
    new = np.where(classes == N, digits_next, new)
    prefix = (space | punct) & (classes != NL) & ~letter & letter_ahead
    new = np.where(prefix, np.where(_shift(upper, -1, False), UPPER_PART, LOWER_PART), new)
    new = np.where(letter, np.where(upper, upper_next, lower_next), new)

    transfers = np.empty((len(classes), STATES), dtype=np.uint8)
    transfers[:, NEW] = new
    for state, holds, then in (
        (DIGITS, classes == N, digits_next),
        (UPPER_PART, upper, upper_next),
        (LOWER_PART, lower, lower_next),
        (CONTRACTION, (classes == AP) | (behind == AP) | (_shift(classes, 2, SENT) == AP),
         contraction_next),
        (PUNCT, punct, punct_next),
        (STRETCH, (classes == NL) | (points == SLASH), stretch_next),
        (SPACE, space, space_next),
    ):  # fmt: skip
        transfers[:, state] = np.where(holds, then, new)
    transfers[classes == SENT] = NEW
    return transfers


Predicate = Callable[[CharCodes, CodePoints], Flags]
"""(character codes, code points) -> piece-start flags."""

DIGITS_PER_PIECE: Mapping[str, int] = {"cl100k": 3, "qwen2": 1}
"""The cl100k-like families: ``\\p{N}{1,3}`` or (Qwen2) ``\\p{N}``."""

PREDICATES: Mapping[str, Predicate] = {
    "cl100k": lambda codes, _: cl100k_starts(codes.classes, codes.folds, digits_per_piece=3),
    "qwen2": lambda codes, _: cl100k_starts(codes.classes, codes.folds, digits_per_piece=1),
    "gpt2": lambda codes, points: gpt2_starts(codes.classes, codes.folds, points),
    "o200k": o200k_starts,
    "deepseek_v3": lambda codes, points: deepseek_starts(codes, points, np),
}
"""The covered pre-tokenizer families, by their ``app.tokenizer_spec`` names."""


def piece_bounds(starts: Flags) -> tuple[Indices, Indices]:
    """Compaction: (begin, end) character offsets of each piece, from the start flags."""
    begin = np.flatnonzero(starts)
    end = np.append(begin[1:], len(starts))
    return begin, end
