"""DeepSeek-V3's piece starts, as array operations written once for NumPy and CuPy (``xp``).

Its pre-tokenizer is three isolating splits in sequence (``app.tokenizer_spec``), each
seeing the previous one's pieces as whole texts: ``\\p{N}{1,3}`` (digit groups: pieces no
later step splits, so digits start at offsets 0, 3, 6, ... of their run), then CJK runs
``[一-龥぀-ゟ゠-ヿ]+`` (segments of their own), then, inside every segment,

    [ASCII punct][A-Za-z]+ | [^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+ | ?[\\p{P}\\p{S}]+[\\r\\n]*
    | \\s*[\\r\\n]+ | \\s+(?!\\S) | \\s+

whose starts are cl100k's (``piece_starts``) with these changes: punctuation is P and S; a
letter's prefix is whitespace or a character none of the classes take (OTHER: controls, format
characters...), never punctuation, except that a lone ASCII punctuation character not after
U+0020 takes the ASCII letters that follow (the piece ends at the first other letter or mark);
characters OTHER that no letter follows match nothing: each run of them is one piece.
Segment ends act as the text's ends: the characters beyond them read as ``SENT``.
"""

from __future__ import annotations

from typing import Any

from gpu_kernels.char_classes import (
    MARK,
    SENT,
    SP,
    SYMBOL,
    WS,
    CharCodes,
    L,
    N,
    P,
)
from gpu_kernels.run_scans import Array, run_offsets, shift, whitespace_starts

AL, LM, AP, PS, OTHER = range(WS + 1, WS + 6)
"""Stage-3 classes after NL, SP, WS: ASCII letter; other letter or mark; ASCII punctuation;
other punctuation or symbol; anything else."""
CJK_RANGES = ((0x4E00, 0x9FA5), (0x3040, 0x309F), (0x30A0, 0x30FF))


def deepseek_starts(codes: CharCodes, points: Array, xp: Any) -> Array:
    """True where a DeepSeek-V3 piece starts (``points``: the code points)."""
    n = len(points)
    if n == 0:
        return xp.zeros(0, dtype=xp.bool_)
    classes = _stage3_classes(codes, points, xp)
    cjk = xp.zeros(n, dtype=xp.bool_)
    for low, high in CJK_RANGES:
        cjk |= (points >= low) & (points <= high)
    digit = codes.classes == N
    segment_start = digit | shift(digit, 1, True, xp) | (cjk != shift(cjk, 1, False, xp))
    segment_start |= classes == SENT
    segment_start[0] = True
    prev = xp.where(segment_start, SENT, shift(classes, 1, SENT, xp))
    prev2 = xp.where(
        segment_start | shift(segment_start, 1, True, xp), SENT, shift(classes, 2, SENT, xp)
    )
    following = xp.where(shift(segment_start, -1, True, xp), SENT, shift(classes, -1, SENT, xp))

    punct = (classes == AP) | (classes == PS)
    prev_punct = (prev == AP) | (prev == PS)
    starts = (classes == SENT) | (punct & ~prev_punct & (prev != SP))
    letter = (classes == AL) | (classes == LM)
    first = letter & (prev != AL) & (prev != LM)
    takes_ascii = (
        first & (classes == AL) & (prev == AP) & (prev2 != AP) & (prev2 != PS) & (prev2 != SP)
    )
    starts |= first & ~((prev == SP) | (prev == WS) | (prev == OTHER) | takes_ascii)
    # The first other letter after ASCII letters a lone ASCII punctuation character took.
    ascii_offsets = run_offsets(classes == AL, xp)
    ascii_begin = xp.maximum(xp.arange(n) - 1 - shift(ascii_offsets, 1, 0, xp), 0)
    starts |= (classes == LM) & (prev == AL) & takes_ascii[ascii_begin]
    starts |= (classes == OTHER) & ((following == AL) | (following == LM) | (prev != OTHER))
    starts = xp.where(digit, run_offsets(digit, xp) % 3 == 0, starts)

    # whitespace_starts reads cl100k's classes: whitespace, punctuation, a segment's end
    spaces = xp.where(punct, P, xp.where(classes <= WS, classes, L))
    spaces = xp.where(digit | cjk | (classes == SENT), SENT, spaces).astype(xp.uint8)
    whitespace_starts(spaces, starts, xp)
    starts[0] = True
    return starts


def _stage3_classes(codes: CharCodes, points: Array, xp: Any) -> Array:
    classes, kinds = codes.classes, codes.kinds
    ascii_letter = ((points | 0x20) >= ord("a")) & ((points | 0x20) <= ord("z"))
    other = xp.where((classes == L) | (kinds == MARK), LM, OTHER)
    other = xp.where(kinds == SYMBOL, xp.where(points < 0x80, AP, PS), other)
    other = xp.where(ascii_letter, AL, other)
    out: Array = xp.where(classes <= WS, classes, other).astype(xp.uint8)
    out[classes == SENT] = SENT
    return out
