"""Run-level facts from scans, written once for NumPy and CuPy (``xp`` is either module).

Only operations both libraries share: elementwise comparisons, ``cumsum``, ``flatnonzero``,
``searchsorted`` and fancy indexing, so the twin and the device run the same code for the
stages that are scans rather than per-character rules.
"""

from __future__ import annotations

from typing import Any

from gpu_kernels.char_classes import AP, LOWER, MARK, NL, OTHER_LETTER, SENT, UPPER, WS

Array = Any
"""A 1-D ``numpy.ndarray`` or ``cupy.ndarray``."""


def shift(values: Array, by: int, fill: Any, xp: Any) -> Array:
    """``values[i - by]``, ``fill`` where that falls outside the text (``by`` < 0: ahead)."""
    out = xp.full_like(values, fill)
    if by >= 0:
        out[by:] = values[: len(values) - by]
    else:
        out[:by] = values[-by:]
    return out


def runs(mask: Array, xp: Any) -> tuple[Array, Array]:
    """(begin, end) of each maximal run of ``mask``, ends exclusive: the edges alternate, a
    run's begin then its end (one ``flatnonzero``: on the device, one synchronisation)."""
    flags = mask.astype(xp.int8)
    zero = xp.zeros(1, dtype=xp.int8)
    edges = xp.flatnonzero(xp.diff(xp.concatenate((zero, flags, zero))))
    return edges[0::2], edges[1::2]


def run_offsets(mask: Array, xp: Any) -> Array:
    """Offset of each position in its run of ``mask`` (meaningful where ``mask`` holds)."""
    opens = mask.copy()
    opens[1:] &= ~mask[:-1]
    begins = xp.flatnonzero(opens)
    if len(begins) == 0:
        return xp.zeros(len(mask), dtype=xp.int64)
    return xp.arange(len(mask)) - begins[xp.maximum(xp.cumsum(opens) - 1, 0)]


def whitespace_starts(classes: Array, starts: Array, xp: Any) -> None:
    """Mark the piece starts inside whitespace runs of the cl100k family, in place.

    Punctuation absorbs the newlines opening the run after it; the rest [a', b) starts at a'
    and after its last newline t, and hands b-1 to the next piece when b-1 > t and b does not
    end the text or a stretch (``_continues``).
    """
    n = len(classes)
    begin, end = runs(classes <= WS, xp)
    if len(begin) == 0:
        return
    newline = classes == NL
    # A newline stretch ends at the next non-newline.
    stretch_end = _first_at_or_after(xp.flatnonzero(~newline), begin, n, xp)
    before = classes[xp.maximum(begin - 1, 0)]
    absorbs = (begin > 0) & (before >= AP) & (before != SENT)
    first = xp.where(absorbs, xp.minimum(stretch_end, end), begin)
    last_newline = _last_before(xp.flatnonzero(newline), end, xp)
    after_newline = xp.maximum(last_newline + 1, first)
    _mark(starts, first, first < end, xp)
    _mark(starts, after_newline, after_newline < end, xp)
    _mark(starts, end - 1, _continues(classes, end, xp) & (end - 1 > after_newline), xp)


def gpt2_whitespace_starts(classes: Array, starts: Array, xp: Any) -> None:
    """GPT-2's whitespace runs [a, b), in place: a starts, and b-1 when b-1 > a and b does
    not end the text or a stretch (``\\s+(?!\\S)`` leaves the last one to the next piece)."""
    begin, end = runs(classes <= WS, xp)
    starts[begin] = True
    _mark(starts, end - 1, _continues(classes, end, xp) & (end - 1 > begin), xp)


def case_run_facts(classes: Array, kinds: Array, xp: Any) -> tuple[Array, Array, Array]:
    """Run facts of o200k's transfers (``case_split``), per character p:

    * joins: p's run of upper-class letters (``[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]``) is
      followed by ``\\p{Ll}`` (a piece then runs on through the lowercase letters);
    * last_other: p is the run's last ``\\p{Lm}\\p{Lo}\\p{M}`` (where a word that does not
      join ends: the lowercase class needs one character of its own);
    * newline_ahead: a newline lies in [p, end of p's whitespace run).
    """
    n = len(classes)
    at = xp.arange(n)
    upper = (kinds == UPPER) | (kinds == OTHER_LETTER) | (kinds == MARK)
    both = upper & (kinds != UPPER)
    run_end = _first_at_or_after(xp.flatnonzero(~upper), at, n, xp)
    joins = (run_end < n) & (kinds[xp.minimum(run_end, n - 1)] == LOWER)
    following = _first_at_or_after(xp.flatnonzero(both | ~upper), at + 1, n, xp)
    last_other = both & ((following == n) | ~both[xp.minimum(following, n - 1)])
    run_ends = _first_at_or_after(xp.flatnonzero(classes > WS), at, n, xp)
    newline_ahead = _first_at_or_after(xp.flatnonzero(classes == NL), at, n, xp) < run_ends
    return joins, last_other, newline_ahead


def scan_states(transfers: Array, xp: Any) -> Array:
    """The state at each position from state 0 at position 0, given each position's transfer
    function (``transfers[p, s]``: the state at p + 1 when p is in state s).

    Prefix composition by doubling: after the round of width d, row p composes the transfers
    of (p - 2d, p].  It stops once every row is constant (composing more cannot change it), so
    the rounds follow the longest stretch where the state is still in doubt, not the text.
    """
    n = len(transfers)
    composed = transfers
    width = 1
    while width < n and not bool((composed == composed[:, :1]).all()):
        head = composed[:width]
        tail = xp.take_along_axis(composed[width:], composed[:-width], axis=1)
        composed = xp.concatenate((head, tail))
        width *= 2
    states = xp.zeros(n, dtype=transfers.dtype)
    states[1:] = composed[:-1, 0]
    return states


def _mark(starts: Array, at: Array, taken: Array, xp: Any) -> None:
    """``starts[at[taken]] = True`` without selecting first (on the device a selection waits
    for its count): the ones not taken mark position 0, which starts every text's pieces
    anyway (callers set it)."""
    starts[xp.where(taken, at, 0)] = True


def _continues(classes: Array, end: Array, xp: Any) -> Array:
    """Whether the text goes on at each ``end`` within the same stretch (no sentinel there)."""
    n = len(classes)
    return (end < n) & (classes[xp.minimum(end, n - 1)] != SENT)


def _first_at_or_after(positions: Array, queries: Array, missing: int, xp: Any) -> Array:
    """For each query, the first of the sorted ``positions`` >= it, else ``missing``."""
    if len(positions) == 0:
        return xp.full(len(queries), missing, dtype=xp.int64)
    at = xp.searchsorted(positions, queries)
    return xp.where(at < len(positions), positions[xp.minimum(at, len(positions) - 1)], missing)


def _last_before(positions: Array, queries: Array, xp: Any) -> Array:
    """For each query, the last of the sorted ``positions`` < it, else -1."""
    if len(positions) == 0:
        return xp.full(len(queries), -1, dtype=xp.int64)
    at = xp.searchsorted(positions, queries) - 1
    return xp.where(at >= 0, positions[xp.maximum(at, 0)], -1)
