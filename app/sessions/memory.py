"""The in-memory session store: each session's token state is the ``tokens`` slot of its
context in the ``SessionRegistry``, the one LRU (bounded in bytes, thread-safe) of everything
remembered of a session, so that an eviction takes a session's state and its other memos
together.  A ``SessionKey`` (tenant, name) lives in the context ``tenant/name``
(``context_key``): the proxy's session keys are ``tenant/s:...`` or ``tenant/m:...``, the
very keys of the session's other memos; keyless callers' texts are ``tenant/c:<n>``.

Callers that race on one session each work from a consistent snapshot (states are immutable,
``tokenization.state``); the last writer wins, and every state written is exact for its own
text.

Content lookup (no session key) indexes each text by a checksum of the 256 bytes ending at a few
anchor lengths (256, 1K, 4K, ... bytes).  That costs O(1) per write.  A checksum hit only
proposes a candidate: its common prefix is measured bytewise (the longest wins), and a candidate
that differs near the start counts only if the anchor's bytes themselves match.  Whatever is
returned is just a base for the diff, which verifies every byte it reuses.  The index is the
token slot's ``SlotIndex``: kept, and read, under the registry's lock, it loses a state when
the registry evicts its context.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Protocol, cast

from app.sessions.registry import SessionRegistry
from app.tokenization.diff import common_prefix
from app.tokenization.state import SessionState

SessionKey = tuple[str, str]
"""(tenant, session id): sessions never match across tenants."""

_ANCHOR_SPAN = 256
_ANCHORS = tuple(_ANCHOR_SPAN * 4**k for k in range(12))
_MAX_CANDIDATES = 8
SLOT = "tokens"
"""The registry slot of the token states."""


def context_key(key: SessionKey) -> str:
    """The registry key of the session ``key`` names: ``tenant/name``."""
    return f"{key[0]}/{key[1]}"


def anchors(text: bytes) -> list[tuple[int, int]]:
    """(length, checksum of the 256 bytes before it) at each anchor length within the text."""
    return [
        (length, zlib.crc32(memoryview(text)[length - _ANCHOR_SPAN : length]))
        for length in _ANCHORS
        if length <= len(text)
    ]


class SessionStore(Protocol):
    """What the session tokenizer needs from a store (memory, or Redis behind it)."""

    @property
    def registry(self) -> SessionRegistry:
        """Where the sessions' contexts are (the token states' and the other memos')."""
        ...

    def get(self, key: SessionKey) -> SessionState | None: ...

    def put(self, key: SessionKey, state: SessionState) -> None: ...

    def drop(self, key: SessionKey) -> None: ...

    def find_by_content(
        self, tenant: str, text: bytes
    ) -> tuple[SessionKey, SessionState] | None: ...

    def stats(self) -> dict[str, int]: ...


@dataclass(frozen=True, slots=True)
class _Stored:
    key: SessionKey
    """Checked on reads: two keys may name one context (a tenant holding a "/")."""
    state: SessionState
    marks: tuple[tuple[int, int], ...]
    """``anchors(state.text)``, computed before the lock is taken."""


class MemoryStore:
    """Token states in the ``tokens`` slot of ``registry`` (one of ``max_bytes`` when None);
    its budget bounds them together with every other memo of the sessions."""

    def __init__(
        self, max_bytes: int = 512 << 20, *, registry: SessionRegistry | None = None
    ) -> None:
        self.registry = registry if registry is not None else SessionRegistry(max_bytes)
        # Under the registry's lock, as the slot index's callbacks run:
        self._index: dict[tuple[str, int, int], dict[SessionKey, SessionState]] = {}
        self._states = 0
        self._bytes = 0
        self._evictions = 0
        self._refused = 0
        self.registry.slot(SLOT, index=self)

    @property
    def max_bytes(self) -> int:
        return self.registry.max_bytes

    def get(self, key: SessionKey) -> SessionState | None:
        stored = cast("_Stored | None", self.registry.value(context_key(key), SLOT))
        return stored.state if stored is not None and stored.key == key else None

    def put(self, key: SessionKey, state: SessionState) -> None:
        stored = _Stored(key, state, tuple(anchors(state.text)))
        if not self.registry.store(context_key(key), SLOT, stored, state.nbytes):
            with self.registry.lock:
                self._refused += 1

    def drop(self, key: SessionKey) -> None:
        self.registry.discard(context_key(key), SLOT)

    def find_by_content(self, tenant: str, text: bytes) -> tuple[SessionKey, SessionState] | None:
        """The stored text of ``tenant`` sharing the longest prefix with ``text`` (verified)."""
        marks = anchors(text)
        candidates: dict[SessionKey, tuple[int, SessionState]] = {}
        with self.registry.lock:
            for length, mark in reversed(marks):
                bucket = self._index.get((tenant, length, mark), {})
                for key in reversed(bucket):
                    if key not in candidates:
                        candidates[key] = (length, bucket[key])
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
        """The token states' figures, and the registry's (``context_*``: every memo of the
        sessions, what ``max_bytes`` bounds)."""
        registry = self.registry.stats()
        with self.registry.lock:
            return {
                "sessions": self._states,
                "bytes": self._bytes,
                "max_bytes": registry["max_bytes"],
                "evictions": self._evictions,
                "refused_oversize": self._refused,
                "contexts": registry["sessions"],
                "context_bytes": registry["bytes"],
                "context_evictions": registry["evictions"],
            }

    def added(self, key: str, value: object) -> None:
        """``SlotIndex``: a state was stored."""
        stored = cast("_Stored", value)
        tenant = stored.key[0]
        for length, mark in stored.marks:
            self._index.setdefault((tenant, length, mark), {})[stored.key] = stored.state
        self._states += 1
        self._bytes += stored.state.nbytes

    def removed(self, key: str, value: object, *, evicted: bool) -> None:
        """``SlotIndex``: a state left (replaced, dropped, or evicted with its context)."""
        stored = cast("_Stored", value)
        tenant = stored.key[0]
        for length, mark in stored.marks:
            bucket = self._index.get((tenant, length, mark))
            if bucket is not None:
                bucket.pop(stored.key, None)
                if not bucket:
                    del self._index[(tenant, length, mark)]
        self._states -= 1
        self._bytes -= stored.state.nbytes
        self._evictions += evicted
