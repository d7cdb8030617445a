"""The in-memory session store (LRU, bounded in bytes, thread-safe).

Callers that race on one session each work from a consistent snapshot (states are immutable,
``tokenization.state``); the last writer wins, and every state written is exact for its own
text.

Content lookup (no session key) indexes each text by a checksum of the 256 bytes ending at a few
anchor lengths (256, 1K, 4K, ... bytes).  That costs O(1) per write.  A checksum hit only
proposes a candidate: its common prefix is measured bytewise (the longest wins), and a candidate
that differs near the start counts only if the anchor's bytes themselves match.  Whatever is
returned is just a base for the diff, which verifies every byte it reuses.
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from typing import Protocol

from app.tokenization.diff import common_prefix
from app.tokenization.state import SessionState

SessionKey = tuple[str, str]
"""(tenant, session id): sessions never match across tenants."""

_ANCHOR_SPAN = 256
_ANCHORS = tuple(_ANCHOR_SPAN * 4**k for k in range(12))
_MAX_CANDIDATES = 8


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
