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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from app.tokenization.chunked import ChunkedEncoder
from app.tokenization.diff import Run, align
from app.tokenization.engines import Engine
from app.tokenization.reference import CopiedIds, IdArray, OffsetArray
from app.tokenization.state import SessionState


class Cut(NamedTuple):
    """A stable cut: its byte offset and how many stored tokens end at or before it."""

    offset: int
    tokens: int


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
    widest: int = 0
    """The widest window a search looked in (bytes)."""
    seconds: float = 0.0
    """Time spent planning: the diff and the cut searches."""


@dataclass(slots=True)
class Plan:
    parts: list[Reuse | Fresh] = field(default_factory=list)
    stats: SearchStats = field(default_factory=SearchStats)
    chunks: int = 0
    """Chunks of fresh text the assembly encoded in parallel (``chunked``)."""
    native_bytes: int = 0
    """Bytes of fresh text the native encoder encoded (``chunked``)."""
    engines: list[tuple[int, Engine]] = field(default_factory=list)
    """Which engine gave the assembled ids, part by part (``engines``)."""

    @property
    def reused_runs(self) -> int:
        return sum(isinstance(p, Reuse) for p in self.parts)


class Repairer:
    """Finds stable cuts around each change and splices reference encodes between them."""

    def __init__(
        self,
        encoder: ChunkedEncoder,
        *,
        window: int,
        doublings: int,
        resync_search: int,
    ) -> None:
        self.encoder = encoder
        self.rules = encoder.rules
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
            (a, first), (b, last) = span
            shift = run.new_start - run.old_start
            if a + shift > cursor:
                plan.parts.append(Fresh(cursor, a + shift))
            plan.parts.append(Reuse(first, last, shift))
            cursor = b + shift
        if cursor < len(new):
            plan.parts.append(Fresh(cursor, len(new)))
        return plan

    def assemble(self, old: SessionState, new: bytes, plan: Plan) -> tuple[SessionState, CopiedIds]:
        """The state of ``new``, and which stretches of its ids are old ids (``plan.chunks``
        counts the fresh text's parallel chunks).  Old ids kept from the start on are not
        copied where ``old``'s arrays can grow in place."""
        first = plan.parts[0]
        keep = first.last if isinstance(first, Reuse) and not first.first | first.shift else 0
        ids: list[IdArray] = []
        ends: list[OffsetArray] = []
        runs: list[tuple[int, int, int]] = [(0, keep, 0)] if keep else []
        plan.engines = [(keep, "reused")]
        at = keep
        for part in plan.parts[1:] if keep else plan.parts:
            if isinstance(part, Reuse):
                runs.append((part.first, part.last, at))
                plan.engines.append((part.last - part.first, "reused"))
                ids.append(old.ids[part.first : part.last])
                stored = old.ends[part.first : part.last]
                ends.append(stored + np.int32(part.shift) if part.shift else stored)
            else:
                fresh = self.encoder.encode(new[part.start : part.end])
                ids.append(fresh.ids)
                ends.append(fresh.ends + np.int32(part.start))
                plan.chunks += fresh.chunks
                plan.native_bytes += fresh.native_bytes
                plan.engines += fresh.engines
            at += len(ids[-1])
        return old.extended(new, keep, ids, ends), CopiedIds(old.ids, tuple(runs))

    def _reusable(
        self, old: SessionState, new: bytes, run: Run, stats: SearchStats
    ) -> tuple[Cut, Cut] | None:
        """Old-text cuts (a, b) inside ``run`` that are stable in both texts, if found."""
        region = (run.old_start, run.old_end)
        # Where the run starts (ends) both texts, nothing beyond it can disagree.
        open_ends = (
            run.old_start == 0 and run.new_start == 0,
            run.old_end == len(old.text) and run.new_end == len(new),
        )
        a = Cut(0, 0) if open_ends[0] else self._search(old, region, open_ends, True, stats)
        if a is None:
            return None
        if open_ends[1]:
            b: Cut | None = Cut(len(old.text), len(old.ids))
        else:
            b = self._search(old, (max(a.offset, region[0]), region[1]), open_ends, False, stats)
        if b is None or b.offset <= a.offset:
            return None
        return a, b

    def _search(
        self,
        old: SessionState,
        region: tuple[int, int],
        open_ends: tuple[bool, bool],
        ascending: bool,
        stats: SearchStats,
    ) -> Cut | None:
        """The stable cut nearest the changed side of ``region``, in a window that widens."""
        stats.searches += 1
        width = self.window
        for attempt in range(self.doublings + 1):
            stats.widest = max(stats.widest, width)
            if ascending:
                lo, hi = region[0], region[0] + width
            else:
                lo, hi = region[1] - width, region[1]
            cuts = self.rules.iter_cuts(
                old.text, lo, hi, region, open_ends=open_ends, descending=not ascending
            )
            found = self._first_valid(old, cuts, stats)
            if found is not None:
                if attempt == 0:
                    stats.first_window += 1
                return found
            if width >= region[1] - region[0]:
                break
            stats.retries += 1
            width *= 2
        stats.misses += 1
        return None

    @staticmethod
    def _first_valid(old: SessionState, cuts: Iterable[int], stats: SearchStats) -> Cut | None:
        """The first cut at which a stored token ends exactly, with its token count."""
        for c in cuts:
            # An int32 needle: a Python int would make numpy cast the whole array (O(n)).
            k = int(np.searchsorted(old.ends, np.int32(c), side="right"))
            if k and old.ends[k - 1] == c:
                return Cut(c, k)
            stats.rejected += 1
        return None
