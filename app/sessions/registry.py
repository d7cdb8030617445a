"""One context per session, in one LRU bounded by bytes: everything the proxy remembers of a
session's previous call.

A ``SessionContext`` holds one slot per memo (the body parser's previous body, the client
translators' turns, the special-token scan, the render memo, the last encoded text, the id
JSON, ...); its size is the sum of its slots' sizes, and the registry evicts whole contexts,
least recently used first, until the sum over all of them is within ``max_bytes``.  A memo
sees its slot through ``registry.slot(name)`` (``app.memos.Memos``).  A slot may have an
index (``SlotIndex``: the token states' content lookup) that the registry tells of every value
entering or leaving the slot, evictions included, so that it never outlives its context.

Lock discipline: one lock, the registry's, held only for the dictionary work of a lookup, a
store or an eviction (O(1) but for evictions), never while a memo computes.  Two calls of
one session may run at once: each works from the values it read, which are immutable or,
for the render memo, made safe to share by their owner; the last writer wins and every value
written is exact for its own call.  No lock is held across a call because a continuation
runs inline on the event loop, where waiting for another thread would stall every client.
An index is told under the lock, and read under it (``lock``): it is the same discipline.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Protocol, TypeVar, cast

V = TypeVar("V")


class SlotIndex(Protocol):
    """Kept beside one slot's values, told under the registry's lock (O(1) work, no raising)."""

    def added(self, key: str, value: object) -> None:
        """``value`` was stored in the slot of session ``key``."""

    def removed(self, key: str, value: object, *, evicted: bool) -> None:
        """``value`` left the slot of session ``key`` (replaced, dropped, forgotten, or with
        its whole context when ``evicted`` to stay within the budget)."""


class SessionContext:
    """The memos' values of one session: slot name -> (value, bytes)."""

    __slots__ = ("nbytes", "values")

    def __init__(self) -> None:
        self.values: dict[str, tuple[object, int]] = {}
        self.nbytes = 0


class SessionRegistry:
    """The session contexts, one LRU over all of them within ``max_bytes``; thread-safe."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._contexts: OrderedDict[str, SessionContext] = OrderedDict()
        self._bytes = 0
        self._evictions = 0
        self._indexes: dict[str, SlotIndex] = {}
        self.lock = threading.Lock()
        """Held for every lookup, store and eviction, and by an index's readers."""

    def slot(self, name: str, index: SlotIndex | None = None) -> Slot[V]:
        """The values of memo ``name`` (one per session key), kept in ``index`` too."""
        if index is not None:
            with self.lock:
                self._indexes[name] = index
        return Slot(self, name)

    def forget(self, key: str) -> None:
        """Drops everything remembered of session ``key``."""
        with self.lock:
            context = self._contexts.pop(key, None)
            if context is not None:
                self._dropped(key, context, evicted=False)

    def holding(self, name: str) -> int:
        """How many sessions hold a value of memo ``name``."""
        with self.lock:
            return sum(name in context.values for context in self._contexts.values())

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {
                "sessions": len(self._contexts),
                "bytes": self._bytes,
                "max_bytes": self.max_bytes,
                "evictions": self._evictions,
            }

    def value(self, key: str, name: str) -> object | None:
        """Slot ``name`` of session ``key`` (``Slot.get``); the session becomes most recent."""
        with self.lock:
            context = self._contexts.get(key)
            if context is None:
                return None
            self._contexts.move_to_end(key)
            found = context.values.get(name)
            return None if found is None else found[0]

    def store(self, key: str, name: str, value: object, size: int) -> bool:
        """Sets slot ``name`` of session ``key``, then evicts down to the budget; False when
        the session would not fit in the whole budget with it (its old value is gone then)."""
        with self.lock:
            context = self._contexts.get(key)
            if context is None:
                context = self._contexts[key] = SessionContext()
            self._contexts.move_to_end(key)
            self._remove(key, context, name)
            if context.nbytes + size > self.max_bytes:
                if not context.values:  # a session larger than the whole budget keeps
                    del self._contexts[key]  # nothing of this call
                return False
            context.values[name] = (value, size)
            context.nbytes += size
            self._bytes += size
            index = self._indexes.get(name)
            if index is not None:
                index.added(key, value)
            while self._bytes > self.max_bytes:
                self._dropped(*self._contexts.popitem(last=False), evicted=True)
                self._evictions += 1
            return True

    def discard(self, key: str, name: str) -> object | None:
        """Removes slot ``name`` of session ``key``; returns its value, if it was there."""
        with self.lock:
            context = self._contexts.get(key)
            if context is None:
                return None
            value = self._remove(key, context, name)
            if not context.values:
                del self._contexts[key]
            return value

    def _remove(self, key: str, context: SessionContext, name: str) -> object | None:
        """Takes slot ``name`` out of session ``key``'s ``context`` (under the lock)."""
        found = context.values.pop(name, None)
        if found is None:
            return None
        context.nbytes -= found[1]
        self._bytes -= found[1]
        index = self._indexes.get(name)
        if index is not None:
            index.removed(key, found[0], evicted=False)
        return found[0]

    def _dropped(self, key: str, context: SessionContext, *, evicted: bool) -> None:
        """Accounts for session ``key``'s ``context``, taken out whole (under the lock)."""
        self._bytes -= context.nbytes
        for name, (value, _) in context.values.items():
            index = self._indexes.get(name)
            if index is not None:
                index.removed(key, value, evicted=evicted)


class Slot(Generic[V]):
    """One memo's view of the registry (``app.memos.Memos``)."""

    __slots__ = ("_name", "_registry")

    def __init__(self, registry: SessionRegistry, name: str) -> None:
        self._registry = registry
        self._name = name

    def get(self, key: str) -> V | None:
        return cast("V | None", self._registry.value(key, self._name))

    def put(self, key: str, value: V, size: int) -> None:
        self._registry.store(key, self._name, value, size)

    def drop(self, key: str) -> V | None:
        return cast("V | None", self._registry.discard(key, self._name))
