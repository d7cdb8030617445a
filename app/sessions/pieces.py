"""Exact ids of a transcript split at special tokens, reusing the session's previous call.

Hugging Face encodes a text by first splitting it at special-token matches and then encoding
each piece between them on its own.  ``PieceEncoder`` does the same with the pieces' special
matching off (user-typed special text stays text, see ``typed_specials``), and between calls
of a session reuses what cannot have changed:

* the matches and pieces that end at least one special-token length before the first
  difference from the previous text (a match is found scanning left to right, so the scan of
  the identical prefix is identical);
* everything from the first match, found by scanning the new text from the change onwards,
  that coincides with a match of the previous text inside their common suffix: the scan
  resumes from the same state over identical text, so every later match and piece is the same.

Pieces in between come from the previous call's pieces by text (an unchanged message renders
to the same piece) or are encoded.  Sentinel characters in the text stand for typed special
tokens; a previous state is reused only when every sentinel it holds means the same token.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from app.memos import Memos
from app.tokenization.reference import CopiedIds, IdArray

_CHUNK = 1 << 16
_TRIES = 8  # resync attempts after a change before only the common suffix is tried
_PROBE = 32  # characters before a match looked up in the old text
_NEAR = 4096  # ... this far either side of where the last shift puts them
Positions = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class PieceState:
    """One call's text (with sentinels), its special matches and the ids."""

    text: str
    sentinels: dict[str, str]
    starts: Positions
    ends: Positions
    id_index: Positions
    """Index in ``ids`` of each match's special-token id."""
    ids: IdArray
    pieces: dict[str, IdArray]
    """The ids of each piece text (sentinels restored) of this call."""

    @property
    def nbytes(self) -> int:
        cached = sum(4 * len(t) + ids.nbytes for t, ids in self.pieces.items())
        return 4 * len(self.text) + self.ids.nbytes + 3 * self.starts.nbytes + cached


class PieceIds(NamedTuple):
    ids: IdArray
    reused: int
    """Ids that came from the previous call or the piece cache."""
    copied: CopiedIds | None
    """The stretches copied from the previous call's ids (the id JSON reuses their text)."""


@dataclass(slots=True)
class _Builder:
    ids: list[IdArray]
    starts: list[int]
    ends: list[int]
    id_index: list[int]
    cached: dict[str, IdArray]
    """The previous call's pieces by text."""
    pieces: dict[str, IdArray] = field(default_factory=dict)
    count: int = 0
    reused: int = 0
    copied: list[tuple[int, int, int]] = field(default_factory=list)
    """(first, last, at) of each stretch of the previous call's ids copied (``CopiedIds``)."""

    def add_ids(self, ids: IdArray, *, reused: bool) -> None:
        self.ids.append(ids)
        self.count += len(ids)
        self.reused += len(ids) if reused else 0

    def copy_ids(self, old: IdArray, first: int, last: int) -> None:
        """Append the previous call's ids ``old[first:last]``."""
        if last > first:
            self.copied.append((first, last, self.count))
        self.add_ids(old[first:last], reused=True)

    def add_match(self, start: int, end: int, special: IdArray) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.id_index.append(self.count)
        self.add_ids(special, reused=False)


class PieceEncoder:
    def __init__(
        self,
        find: re.Pattern[str],
        special_ids: dict[str, IdArray],
        encode_piece: Callable[[str, str], IdArray],
        *,
        states: Memos[PieceState],
    ) -> None:
        """``states``: each session's last call."""
        self._find = find
        self._special_ids = special_ids
        self._encode_piece = encode_piece
        self._longest = max(map(len, special_ids))
        self._states = states

    def encode(
        self,
        text: str,
        sentinels: dict[str, str],
        restore: Callable[[str], str],
        *,
        session: str,
    ) -> PieceIds:
        old = self._states.get(session)
        out = _Builder([], [], [], [], old.pieces if old is not None else {})
        if old is not None and any(sentinels.get(s) != t for s, t in old.sentinels.items()):
            old = None
        position = self._reuse_prefix(old, text, out) if old is not None else 0
        resync = None
        if old is not None:
            resync = _Resync(old, text, _common_suffix(old.text, text, position))
        while (match := self._find.search(text, position)) is not None:
            if resync is not None:
                run = resync.run_at(match, self._longest)
                if run is not None:
                    self._piece(text[position : match.start()], restore, session, out)
                    position = _copy_matches(resync.old, run, out)
                    continue
            self._piece(text[position : match.start()], restore, session, out)
            out.add_match(match.start(), match.end(), self._special_ids[match.group()])
            position = match.end()
        self._piece(text[position:], restore, session, out)
        ids = np.concatenate(out.ids) if out.ids else np.zeros(0, dtype=np.int32)
        state = PieceState(
            text,
            dict(sentinels),
            np.asarray(out.starts, np.int64),
            np.asarray(out.ends, np.int64),
            np.asarray(out.id_index, np.int64),
            ids,
            out.pieces,
        )
        self._states.put(session, state, state.nbytes)
        copied = CopiedIds(old.ids, tuple(out.copied)) if old is not None and out.copied else None
        return PieceIds(ids, out.reused, copied)

    def forget(self, session: str) -> int:
        """Drops the session's state and its cached pieces (after a divergence nothing
        cached is trusted); returns how many pieces its last call had."""
        state = self._states.drop(session)
        return 0 if state is None else len(state.starts) + 1

    def _reuse_prefix(self, old: PieceState, text: str, out: _Builder) -> int:
        """Copies the old matches (and ids) that end safely inside the common prefix; returns
        where scanning resumes."""
        safe = _common_prefix(old.text, text) - self._longest
        kept = int(np.searchsorted(old.ends, safe, side="right"))
        if not kept:
            return 0
        out.copy_ids(old.ids, 0, int(old.id_index[kept - 1]) + 1)
        out.starts.extend(old.starts[:kept].tolist())
        out.ends.extend(old.ends[:kept].tolist())
        out.id_index.extend(old.id_index[:kept].tolist())
        return int(old.ends[kept - 1])

    def _piece(
        self, piece: str, restore: Callable[[str], str], session: str, out: _Builder
    ) -> None:
        """Ids of the piece: the previous call's for the same text, else encoded
        (``encode_piece`` may repair it from the session's previous piece in the same
        place)."""
        if not piece:
            return
        text = restore(piece)
        found = out.cached.get(text)
        if found is None:
            found = self._encode_piece(text, f"{session}#piece{len(out.starts)}")
        out.add_ids(found, reused=text in out.cached)
        out.pieces[text] = found


@dataclass(frozen=True, slots=True)
class _Run:
    """Old matches ``[first, last)`` that recur in the new text, ``shift`` characters later,
    with all the text from the first one's start to the last one's end (and, with
    ``to_end``, on to the end of both texts)."""

    first: int
    last: int
    shift: int
    to_end: bool


@dataclass(slots=True)
class _Resync:
    """Finds, after a change, where the new text's scan meets the old one's again.

    Matches are found scanning left to right, and whether one starts at a position depends
    only on the following ``longest`` characters.  So from a match that is also an old match
    with identical text around, the scans agree on every match up to ``longest`` before the
    identical stretch ends, and to the end when it runs to the end of both texts (the common
    suffix).  Where the old match lies: in the common suffix, at the shift of the last
    resync (an edit that kept lengths, such as a billing line), or where the text just before
    the match recurs nearby; after ``_TRIES`` misses only the suffix is tried."""

    old: PieceState
    text: str
    suffix: int
    shift: int = 0
    misses: int = 0

    def run_at(self, match: re.Match[str], longest: int) -> _Run | None:
        start = match.start()
        end_shift = len(self.text) - len(self.old.text)
        candidates = []
        if start - end_shift >= len(self.old.text) - self.suffix:
            candidates.append(start - end_shift)
        if self.misses < _TRIES:
            candidates += [start - self.shift, *self._nearby(start)]
        for at in dict.fromkeys(candidates):
            run = self._run(at, start, match.end() - start, longest)
            if run is not None:
                self.shift, self.misses = run.shift, 0
                return run
        self.misses += 1
        return None

    def _nearby(self, start: int) -> list[int]:
        """Old positions where the ``_PROBE`` characters before ``start`` recur, near the
        last shift."""
        if start < _PROBE:
            return []
        probe = self.text[start - _PROBE : start]
        guess = start - self.shift
        found = self.old.text.find(probe, max(guess - _NEAR, 0), guess + _NEAR)
        return [] if found < 0 else [found + _PROBE]

    def _run(self, at: int, start: int, length: int, longest: int) -> _Run | None:
        old = self.old
        j = int(np.searchsorted(old.starts, at))
        if j == len(old.starts) or old.starts[j] != at or old.ends[j] != at + length:
            return None
        same = _common_prefix(old.text, self.text, at, start)
        to_end = at + same == len(old.text) and start + same == len(self.text)
        limit = at + same if to_end else at + same - longest
        last = int(np.searchsorted(old.ends, limit, side="right"))
        if last <= j:
            return None
        return _Run(j, last, start - at, to_end and last == len(old.starts))


def _copy_matches(old: PieceState, run: _Run, out: _Builder) -> int:
    """Copies the old matches of ``run`` and the ids from the first one's to the last one's
    (to the end, for a run to the end); returns where scanning resumes."""
    first, last, shift = run.first, run.last, run.shift
    start_id = int(old.id_index[first])
    stop_id = len(old.ids) if run.to_end else int(old.id_index[last - 1]) + 1
    base = out.count
    out.copy_ids(old.ids, start_id, stop_id)
    out.starts.extend((old.starts[first:last] + shift).tolist())
    out.ends.extend((old.ends[first:last] + shift).tolist())
    out.id_index.extend((old.id_index[first:last] - start_id + base).tolist())
    return len(old.text) + shift if run.to_end else int(old.ends[last - 1]) + shift


def _common_prefix(a: str, b: str, i: int = 0, j: int = 0) -> int:
    """Length of the common prefix of ``a[i:]`` and ``b[j:]``, by C-level comparison of
    chunks that double while they agree (so a short agreement costs little)."""
    n = min(len(a) - i, len(b) - j)
    lo, step = 0, 256
    while lo < n:
        hi = min(n, lo + step)
        if a[i + lo : i + hi] != b[j + lo : j + hi]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[i + lo : i + mid] == b[j + lo : j + mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo, step = hi, min(2 * step, _CHUNK)
    return max(n, 0)


def _common_suffix(a: str, b: str, floor: int) -> int:
    """Length of the common suffix of two strings, not reaching below ``floor`` in either."""
    n = min(len(a), len(b)) - floor
    la, lb = len(a), len(b)
    lo = 0
    while lo < n:
        hi = min(n, lo + _CHUNK)
        if a[la - hi : la - lo] != b[lb - hi : lb - lo]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[la - mid : la - lo] == b[lb - mid : lb - lo]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo = hi
    return max(n, 0)
