"""Session state and the in-memory session store (LRU, bounded in bytes, thread-safe).

A state is immutable: text as UTF-8 bytes, ids as int32, token end offsets as int32, all
read-only.  Callers that race on one session each work from a consistent snapshot; the last
writer wins, and every state written is exact for its own text.

Content lookup (no session key) indexes each text by a checksum of the 256 bytes ending at a few
anchor lengths (256, 1K, 4K, ... bytes).  That costs O(1) per write.  A checksum hit only
proposes a candidate: its common prefix is measured bytewise (the longest wins), and a candidate
that differs near the start counts only if the anchor's bytes themselves match.  Whatever is
returned is just a base for the diff, which verifies every byte it reuses.
"""

from __future__ import annotations

import sys
import threading
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.pieced_text import EncodedPieces
from app.tokenization.diff import common_prefix
from app.tokenization.growable import Growable, Pieces
from app.tokenization.reference import IdArray, OffsetArray

SessionKey = tuple[str, str]
"""(tenant, session id): sessions never match across tenants."""

_ANCHOR_SPAN = 256
_ANCHORS = tuple(_ANCHOR_SPAN * 4**k for k in range(12))
_MAX_CANDIDATES = 8
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

    @property
    def nbytes(self) -> int:
        arrays = self.growth.nbytes if self.growth else self.ids.nbytes + self.ends.nbytes
        return len(self.text) + arrays + _STATE_OVERHEAD


def anchors(text: bytes) -> list[tuple[int, int]]:
    """(length, checksum of the 256 bytes before it) at each anchor length within the text."""
    return [
        (length, zlib.crc32(memoryview(text)[length - _ANCHOR_SPAN : length]))
        for length in _ANCHORS
        if length <= len(text)
    ]


class SessionStore(Protocol):
    """What the session tokenizer needs from a store (memory now; shared backends later)."""

    def get(self, key: SessionKey) -> SessionState | None: ...

    def put(self, key: SessionKey, state: SessionState) -> None: ...

    def drop(self, key: SessionKey) -> None: ...

    def find_by_content(
        self, tenant: str, text: bytes
    ) -> tuple[SessionKey, SessionState] | None: ...

    def stats(self) -> dict[str, int]: ...


class MemoryStore:
    """LRU over whole sessions, evicting the least recently used until under ``max_bytes``."""

    def __init__(self, max_bytes: int = 512 << 20) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._states: OrderedDict[SessionKey, SessionState] = OrderedDict()
        self._index: dict[tuple[str, int, int], dict[SessionKey, None]] = {}
        self._bytes = 0
        self._evictions = 0
        self._refused = 0

    def get(self, key: SessionKey) -> SessionState | None:
        with self._lock:
            state = self._states.get(key)
            if state is not None:
                self._states.move_to_end(key)
            return state

    def put(self, key: SessionKey, state: SessionState) -> None:
        with self._lock:
            self._remove(key)
            if state.nbytes > self.max_bytes:
                self._refused += 1
                return
            self._states[key] = state
            self._bytes += state.nbytes
            for length, mark in anchors(state.text):
                self._index.setdefault((key[0], length, mark), {})[key] = None
            while self._bytes > self.max_bytes:
                oldest = next(iter(self._states))
                self._remove(oldest)
                self._evictions += 1

    def drop(self, key: SessionKey) -> None:
        with self._lock:
            self._remove(key)

    def find_by_content(self, tenant: str, text: bytes) -> tuple[SessionKey, SessionState] | None:
        """The stored text of ``tenant`` sharing the longest prefix with ``text`` (verified)."""
        marks = anchors(text)
        candidates: dict[SessionKey, tuple[int, SessionState]] = {}
        with self._lock:
            for length, mark in reversed(marks):
                for key in reversed(self._index.get((tenant, length, mark), {})):
                    if key not in candidates:
                        candidates[key] = (length, self._states[key])
                if len(candidates) >= _MAX_CANDIDATES:
                    break
        best: tuple[int, SessionKey, SessionState] | None = None
        for key, (length, state) in candidates.items():
            shared = common_prefix(state.text, text)
            if shared < _ANCHOR_SPAN:
                # An edit near the start (a per-call header): the text may still agree from an
                # anchor on, but only if the anchor's bytes really match.
                window = slice(length - _ANCHOR_SPAN, length)
                shared = _ANCHOR_SPAN if state.text[window] == text[window] else 0
            if shared and (best is None or shared > best[0]):
                best = (shared, key, state)
        return None if best is None else (best[1], best[2])

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "sessions": len(self._states),
                "bytes": self._bytes,
                "max_bytes": self.max_bytes,
                "evictions": self._evictions,
                "refused_oversize": self._refused,
            }

    def _remove(self, key: SessionKey) -> None:
        state = self._states.pop(key, None)
        if state is None:
            return
        self._bytes -= state.nbytes
        for length, mark in anchors(state.text):
            bucket = self._index.get((key[0], length, mark))
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._index[(key[0], length, mark)]


Recent = str | EncodedPieces
"""What ``RecentTexts`` keeps of a text."""


class RecentTexts:
    """The text each recently used session was last encoded from, bounded in bytes.

    An accelerator beside the store, not part of a session's state: when a new text starts with
    the previous one (a plain append), ``str.startswith`` proves it without re-encoding the
    whole transcript to UTF-8, which costs more than anything else at millions of characters;
    a pieced text is kept with its pieces' UTF-8 ends, to build the next one's UTF-8 from
    (``EncodedPieces``).  An entry is used only together with the very state it was encoded
    into.  A pieced text counts what its pieces hold, though the render memo mostly holds the
    same objects: the bound stays true once the memo has let them go.  The state is held
    weakly: a state the store has evicted (or refused) is not kept alive from here.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._texts: OrderedDict[SessionKey, tuple[Recent, weakref.ref[SessionState], int]] = (
            OrderedDict()
        )
        self._bytes = 0

    def get(self, key: SessionKey, state: SessionState) -> Recent | None:
        with self._lock:
            entry = self._texts.get(key)
            if entry is None or entry[1]() is not state:
                return None
            self._texts.move_to_end(key)
            return entry[0]

    def put(self, key: SessionKey, text: Recent, state: SessionState) -> None:
        size = sys.getsizeof(text) if isinstance(text, str) else text.nbytes
        with self._lock:
            old = self._texts.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            if size > self.max_bytes:
                return
            self._texts[key] = (text, weakref.ref(state), size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, _, dropped) = self._texts.popitem(last=False)
                self._bytes -= dropped

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"texts": len(self._texts), "bytes": self._bytes, "max_bytes": self.max_bytes}
