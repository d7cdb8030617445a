"""The state of one encoded text: what repair starts from and what a store keeps.

A state is immutable: text as UTF-8 bytes, ids as int32, token end offsets as int32, all
read-only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from app.tokenization.growable import Growable, Pieces
from app.tokenization.reference import IdArray, OffsetArray

_STATE_OVERHEAD = 256


@dataclass(frozen=True, slots=True, weakref_slot=True)
class SessionState:
    """One transcript as last encoded: ``ids[i]`` covers bytes up to ``ends[i]`` of ``text``."""

    text: bytes
    ids: IdArray
    ends: OffsetArray
    growth: Growable | None = field(default=None, compare=False, repr=False)
    """The buffers ``ids`` and ``ends`` are views of, with room to grow in place (None for a
    state decoded from a shared store: its first extension copies)."""
    nbytes: int = field(init=False, compare=False, repr=False)
    """Memory held (buffers' room included); set once: a session's piece states are summed
    on every call."""

    def __post_init__(self) -> None:
        arrays = self.growth.nbytes if self.growth else self.ids.nbytes + self.ends.nbytes
        object.__setattr__(self, "nbytes", len(self.text) + arrays + _STATE_OVERHEAD)

    @classmethod
    def grown(cls, text: bytes, growth: Growable) -> SessionState:
        """The state whose ids and ends are ``growth``'s arrays."""
        ids, ends = growth.views
        return cls(text, ids, ends, growth)

    def extended(self, text: bytes, keep: int, ids: Pieces, ends: Pieces) -> SessionState:
        """The state for ``text`` whose ids and ends are this one's first ``keep`` followed by
        ``ids`` and ``ends``; the kept ones are not copied when this state's buffers have room
        (see ``growable``)."""
        tails: Sequence[Pieces] = (ids, ends)
        growth = (
            self.growth.extended(keep, tails)
            if self.growth is not None
            else Growable.of((self.ids[:keep], self.ends[:keep]), tails)
        )
        return SessionState.grown(text, growth)
