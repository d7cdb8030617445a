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
to the same piece) or are encoded; a long one is repaired from the state of the previous
call's piece it lines up with (``piece_repair``): the one ending where it ends, or starting
where it starts, at the shift of the last resync, or else the one of the same index;
of several, the one sharing most text with it.  Those states are part of the session's one
``PieceState`` and go with it.  Sentinel characters in the text stand for typed special
tokens; a previous state's matches and ids are reused only when every sentinel it holds
means the same token (its pieces are keyed and repaired by their restored text, whatever
the sentinels meant).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from app.memos import Memos
from app.sessions.piece_repair import Piece
from app.tokenization.engines import Engine, EngineParts, EngineRun, runs_of
from app.tokenization.growable import Growable
from app.tokenization.native._native import common_prefix, common_suffix
from app.tokenization.reference import CopiedIds, IdArray
from app.tokenization.state import SessionState

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
    pieces: dict[str, Piece]
    """Each piece text (sentinels restored) this call looked up or encoded."""
    states: dict[int, SessionState]
    """The states of this call's long pieces by index (piece ``k`` is the text before match
    ``k``, or after the last one): what their next versions are repaired from."""
    growth: Growable = field(compare=False, repr=False)
    """The buffer ``ids`` is a view of: the next call's ids grow in it where they keep these
    from the start (``growable``), instead of a fresh copy of all of them."""

    @property
    def nbytes(self) -> int:
        # a cached piece's state is one of ``states``: its ids are counted there
        cached = sum(
            4 * len(t) + (p.ids.nbytes if p.state is None else 0) for t, p in self.pieces.items()
        )
        states = sum({id(s): s.nbytes for s in self.states.values()}.values())
        return 4 * len(self.text) + self.growth.nbytes + 3 * self.starts.nbytes + cached + states


class PieceIds(NamedTuple):
    ids: IdArray
    reused: int
    """Ids taken from the previous call: its stretches of ids, its pieces by text, and what
    repair kept of the pieces it repaired."""
    copied: CopiedIds | None
    """The stretches copied from the previous call's ids (the id JSON reuses their text)."""
    engines: tuple[EngineRun, ...]
    """Which engine gave which ids (``Encoding.engines``): "reused" for the above, the repair
    engine's runs for the pieces it encoded, "reference" for the others and for the ids of
    fresh special-token matches (the reference vocabulary's ids of the tokens the template
    placed, matched as the reference's own split matches them)."""


@dataclass(slots=True)
class _Column:
    """Positions added one at a time or as arrays (the previous call's, copied), joined once:
    a call at 1M characters copies thousands of matches, and lists of them cost more than
    the rest of the call."""

    parts: list[Positions] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    size: int = 0

    def __len__(self) -> int:
        return self.size

    def append(self, value: int) -> None:
        self.pending.append(value)
        self.size += 1

    def extend(self, values: Positions) -> None:
        self._flush()
        self.parts.append(values)
        self.size += len(values)

    def joined(self) -> Positions:
        self._flush()
        return np.concatenate(self.parts) if self.parts else np.zeros(0, np.int64)

    def _flush(self) -> None:
        if self.pending:
            self.parts.append(np.asarray(self.pending, np.int64))
            self.pending = []


@dataclass(slots=True)
class _Builder:
    ids: list[IdArray]
    cached: dict[str, Piece]
    """The previous call's pieces by text."""
    starts: _Column = field(default_factory=_Column)
    ends: _Column = field(default_factory=_Column)
    id_index: _Column = field(default_factory=_Column)
    pieces: dict[str, Piece] = field(default_factory=dict)
    states: dict[int, SessionState] = field(default_factory=dict)
    engines: list[tuple[int, Engine]] = field(default_factory=list)
    count: int = 0
    copied: list[tuple[int, int, int]] = field(default_factory=list)
    """(first, last, at) of each stretch of the previous call's ids copied (``CopiedIds``)."""

    def add_ids(self, ids: IdArray, engines: EngineParts) -> None:
        self.ids.append(ids)
        self.count += len(ids)
        self.engines += engines

    def copy_ids(self, old: IdArray, first: int, last: int) -> None:
        """Append the previous call's ids ``old[first:last]``."""
        if last > first:
            self.copied.append((first, last, self.count))
        self.add_ids(old[first:last], ((last - first, "reused"),))

    def add_piece(self, text: str, piece: Piece, *, cached: bool) -> None:
        """Append the ids of the piece before match ``len(starts)``."""
        self.add_ids(piece.ids, ((len(piece.ids), "reused"),) if cached else piece.engines)
        self.pieces[text] = piece
        if piece.state is not None:
            self.states[len(self.starts)] = piece.state

    def add_match(self, start: int, end: int, special: IdArray) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.id_index.append(self.count)
        self.add_ids(special, ((len(special), "reference"),))


def _grown(old: PieceState | None, out: _Builder) -> Growable:
    """The call's ids, joined: grown in ``old``'s buffer when they start with its ids copied
    from the start (``_reuse_prefix`` adds those first), else in a new one."""
    parts = out.ids or [np.zeros(0, dtype=np.int32)]
    first, last, at = out.copied[0] if out.copied else (-1, 0, -1)
    if old is not None and first == at == 0 and len(parts[0]) == last:
        return old.growth.extended(last, [parts[1:]])
    return Growable.of(parts[:1], [parts[1:]])


class PieceEncoder:
    def __init__(
        self,
        find: re.Pattern[str],
        special_ids: dict[str, IdArray],
        encode_piece: Callable[[str, SessionState | None], Piece],
        *,
        states: Memos[PieceState],
    ) -> None:
        """``encode_piece(text, base)``: a piece's ids, repaired from ``base`` (the state of
        a piece of the previous call) where it is given; ``states``: each session's last
        call."""
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
        previous = old = self._states.get(session)
        out = _Builder([], previous.pieces if previous is not None else {})
        if old is not None and any(sentinels.get(s) != t for s, t in old.sentinels.items()):
            old = None
        position = self._reuse_prefix(old, text, out) if old is not None else 0
        resync = None
        if old is not None:
            resync = _Resync(old, text, common_suffix(old.text, text, position))
        shift = 0  # where the old text lines up with the new one at ``position``
        while (match := self._find.search(text, position)) is not None:
            run = resync.run_at(match, self._longest) if resync is not None else None
            at = _Alignment(previous, shift, shift if run is None else run.shift)
            self._piece(text, position, match.start(), restore, out, at)
            if resync is not None and run is not None:
                position, shift = _copy_matches(resync.old, run, out), run.shift
                continue
            out.add_match(match.start(), match.end(), self._special_ids[match.group()])
            position = match.end()
        tail = len(text) - len(previous.text) if previous is not None else 0
        self._piece(text, position, len(text), restore, out, _Alignment(previous, shift, tail))
        growth = _grown(old, out)
        (ids,) = growth.views
        state = PieceState(
            text,
            dict(sentinels),
            out.starts.joined(),
            out.ends.joined(),
            out.id_index.joined(),
            ids,
            out.pieces,
            out.states,
            growth,
        )
        self._states.put(session, state, state.nbytes)
        copied = CopiedIds(old.ids, tuple(out.copied)) if old is not None and out.copied else None
        reused = sum(count for count, engine in out.engines if engine == "reused")
        return PieceIds(ids, reused, copied, runs_of(out.engines))

    def forget(self, session: str) -> None:
        """Drops the session's state: its matches, cached pieces and piece states (after a
        divergence nothing of it is trusted)."""
        self._states.drop(session)

    def _reuse_prefix(self, old: PieceState, text: str, out: _Builder) -> int:
        """Copies the old matches (and ids) that end safely inside the common prefix; returns
        where scanning resumes."""
        safe = common_prefix(old.text, text) - self._longest
        kept = int(np.searchsorted(old.ends, safe, side="right"))
        if not kept:
            return 0
        out.copy_ids(old.ids, 0, int(old.id_index[kept - 1]) + 1)
        out.starts.extend(old.starts[:kept])
        out.ends.extend(old.ends[:kept])
        out.id_index.extend(old.id_index[:kept])
        out.states.update((k, s) for k, s in old.states.items() if k < kept)
        return int(old.ends[kept - 1])

    def _piece(
        self,
        text: str,
        start: int,
        end: int,
        restore: Callable[[str], str],
        out: _Builder,
        at: _Alignment,
    ) -> None:
        """Ids of the piece ``text[start:end]``: the previous call's for the same text, else
        those of an earlier piece of this call with that text (the newline between every two
        turns), else encoded (a long one repaired from the previous piece it lines up with)."""
        if start == end:
            return
        masked = text[start:end]
        piece = restore(masked)
        found = out.cached.get(piece)
        if found is not None:
            out.add_piece(piece, found, cached=True)
            return
        found = out.pieces.get(piece)  # (the engine that encoded it gave these ids too)
        if found is None:
            found = self._encode_piece(piece, at.state(masked, start, end, len(out.starts)))
        out.add_piece(piece, found, cached=False)


@dataclass(frozen=True, slots=True)
class _Alignment:
    """Where a new piece lies in the previous call's text: ``start - start_shift`` and
    ``end - end_shift`` are its ends there, when the texts line up around them."""

    previous: PieceState | None
    start_shift: int
    end_shift: int

    def state(self, masked: str, start: int, end: int, index: int) -> SessionState | None:
        """The state of the previous call's piece to repair piece ``index`` (``masked``, at
        ``[start, end)``) from: of the ones ending or starting where it does and the one of
        the same index, the one sharing most text with it (the first on ties)."""
        old = self.previous
        if old is None or not old.states:
            return None
        aligned = (
            _piece_ending(old, end - self.end_shift),
            _piece_starting(old, start - self.start_shift),
            index,
        )
        found = {k: old.states[k] for k in aligned if k is not None and k in old.states}
        if len({id(s) for s in found.values()}) <= 1:
            return next(iter(found.values()), None)
        return found[max(found, key=lambda k: _shared(old, k, masked))]


def _piece_ending(old: PieceState, at: int) -> int | None:
    """Index of the old piece ending at ``at`` (at a match's start or the end of the text)."""
    if at == len(old.text):
        return len(old.starts)
    k = int(np.searchsorted(old.starts, at))
    return k if k < len(old.starts) and old.starts[k] == at else None


def _piece_starting(old: PieceState, at: int) -> int | None:
    """Index of the old piece starting at ``at`` (at a match's end or the start)."""
    if at == 0:
        return 0
    k = int(np.searchsorted(old.ends, at))
    return k + 1 if k < len(old.ends) and old.ends[k] == at else None


def _shared(old: PieceState, index: int, masked: str) -> int:
    """Characters old piece ``index`` shares with ``masked`` at its start and end."""
    start = int(old.ends[index - 1]) if index else 0
    end = int(old.starts[index]) if index < len(old.starts) else len(old.text)
    piece = old.text[start:end]
    prefix = common_prefix(piece, masked)
    return prefix + common_suffix(piece, masked, prefix)


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
        same = common_prefix(old.text, self.text, at, start)
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
    matches = len(out.starts)  # the new index of match ``first``
    out.copy_ids(old.ids, start_id, stop_id)
    top = last if run.to_end else last - 1  # the last piece copied
    out.states.update((k - first + matches, s) for k, s in old.states.items() if first < k <= top)
    out.starts.extend(old.starts[first:last] + shift)
    out.ends.extend(old.ends[first:last] + shift)
    out.id_index.extend(old.id_index[first:last] - start_id + base)
    return len(old.text) + shift if run.to_end else int(old.ends[last - 1]) + shift


