"""Plan and assemble an exact repair of a stored encoding for a new text.

Given the stored state O and the new text N, every run of identical text found by ``diff`` is
reused between two stable cuts inside it (one cut after the change before it, one before the
change after it); everything between reused stretches is encoded afresh by the reference.
Since every cut is stable in both texts (the rules read only bytes inside the identical run),
``tok(N)`` is exactly the concatenation of the parts.  Each cut is also checked against O's
stored token ends (a token must end exactly there), a cheap cross-check of the rules.
A boundary whose cut is not found within the window (doubled up to ``doublings`` times)
is not reused; with nothing reusable the caller encodes N whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.tokenization.boundaries import CutRules
from app.tokenization.diff import Run, align
from app.tokenization.reference import IdArray, OffsetArray, ReferenceEncoder
from app.tokenization.store import SessionState


@dataclass(frozen=True, slots=True)
class Reuse:
    """Old ids ``[first, last)``; their text moved by ``shift`` bytes in the new text."""

    first: int
    last: int
    shift: int


@dataclass(frozen=True, slots=True)
class Fresh:
    """New text ``[start, end)`` (byte offsets) to encode with the reference."""

    start: int
    end: int


@dataclass(slots=True)
class SearchStats:
    """Boundary searches of one repair: how many, how many the first window settled, retries."""

    searches: int = 0
    first_window: int = 0
    retries: int = 0
    misses: int = 0
    rejected: int = 0


@dataclass(slots=True)
class Plan:
    parts: list[Reuse | Fresh] = field(default_factory=list)
    stats: SearchStats = field(default_factory=SearchStats)

    @property
    def reused_runs(self) -> int:
        return sum(isinstance(p, Reuse) for p in self.parts)


class Repairer:
    """Finds stable cuts around each change and splices reference encodes between them."""

    def __init__(
        self,
        rules: CutRules,
        reference: ReferenceEncoder,
        *,
        window: int,
        doublings: int,
        resync_search: int,
    ) -> None:
        self.rules = rules
        self.reference = reference
        self.window = window
        self.doublings = doublings
        self.resync_search = resync_search

    def plan(self, old: SessionState, new: bytes, prefix: int) -> Plan:
        """Parts covering ``new`` in order; no Reuse among them means nothing was reusable."""
        runs = [Run(0, 0, prefix)] if prefix else []
        if prefix < len(old.text) and prefix < len(new):
            runs += align(old.text, new, prefix, search=self.resync_search)
        plan = Plan()
        cursor = 0
        for run in runs:
            span = self._reusable(old, new, run, plan.stats)
            if span is None:
                continue
            a, b = span
            first, last = _tokens_before(old.ends, a), _tokens_before(old.ends, b)
            shift = run.new_start - run.old_start
            if a + shift > cursor:
                plan.parts.append(Fresh(cursor, a + shift))
            plan.parts.append(Reuse(first, last, shift))
            cursor = b + shift
        if cursor < len(new):
            plan.parts.append(Fresh(cursor, len(new)))
        return plan

    def assemble(self, old: SessionState, new: bytes, plan: Plan) -> tuple[IdArray, OffsetArray]:
        ids: list[IdArray] = []
        ends: list[OffsetArray] = []
        for part in plan.parts:
            if isinstance(part, Reuse):
                ids.append(old.ids[part.first : part.last])
                stored = old.ends[part.first : part.last]
                ends.append(stored + np.int32(part.shift) if part.shift else stored)
            else:
                fresh_ids, fresh_ends = self.reference.encode(
                    new[part.start : part.end].decode("utf-8")
                )
                ids.append(fresh_ids)
                ends.append(fresh_ends + np.int32(part.start))
        return np.concatenate(ids), np.concatenate(ends)

    def _reusable(
        self, old: SessionState, new: bytes, run: Run, stats: SearchStats
    ) -> tuple[int, int] | None:
        """Old-text cuts (a, b) inside ``run`` that are stable in both texts, if found."""
        context = self.rules.context
        at_start = run.old_start == 0 and run.new_start == 0
        if at_start:
            a = 0
        else:
            a_found = self._search(old, run.old_start + context, run.old_end - context, True, stats)
            if a_found is None:
                return None
            a = a_found
        if run.old_end == len(old.text) and run.new_end == len(new):
            b: int | None = len(old.text)
        else:
            # Both texts begin the run at their start: nothing lies left of it to disagree on.
            lo = max(a, 1 if at_start else run.old_start + context)
            b = self._search(old, lo, run.old_end - context, False, stats)
        if b is None or b <= a:
            return None
        return a, b

    def _search(
        self, old: SessionState, lo: int, hi: int, ascending: bool, stats: SearchStats
    ) -> int | None:
        """The first stable cut in [lo, hi] from the changed side, widening the window."""
        if lo > hi:
            return None
        stats.searches += 1
        width = self.window
        for attempt in range(self.doublings + 1):
            if ascending:
                found = self._first_valid(old, self.rules.ascending(old.text, lo, min(hi, lo + width)), stats)
            else:
                found = self._first_valid(old, self.rules.descending(old.text, max(lo, hi - width), hi), stats)
            if found is not None:
                if attempt == 0:
                    stats.first_window += 1
                return found
            if (hi - lo) <= width:
                break
            stats.retries += 1
            width *= 2
        stats.misses += 1
        return None

    @staticmethod
    def _first_valid(old: SessionState, cuts: object, stats: SearchStats) -> int | None:
        for c in cuts:  # type: ignore[attr-defined]
            k = _tokens_before(old.ends, c)
            if k and old.ends[k - 1] == c:
                return int(c)
            stats.rejected += 1
        return None


def _tokens_before(ends: OffsetArray, cut: int) -> int:
    """How many tokens end at or before byte ``cut``."""
    return int(np.searchsorted(ends, cut, side="right"))
