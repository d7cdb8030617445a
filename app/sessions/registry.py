"""One context per session, in one LRU bounded by bytes: everything the proxy remembers of a
session's previous call.

A ``SessionContext`` holds one slot per memo (the body parser's previous body, the client
translators' turns, the special-token scan, the render memo, the last encoded text, the id
JSON, ...); its size is the sum of its slots' sizes, and the registry evicts whole contexts,
least recently used first, until the sum over all of them is within ``max_bytes``.  A memo
sees its slot through ``registry.slot(name)`` (``app.memos.Memos``).

Lock discipline: one lock, the registry's, held only for the dictionary work of a lookup, a
store or an eviction (O(1) but for evictions), never while a memo computes.  Two calls of
one session may run at once: each works from the values it read, which are immutable or,
for the render memo, made safe to share by their owner; the last writer wins and every value
written is exact for its own call.  No lock is held across a call because a continuation
runs inline on the event loop, where waiting for another thread would stall every client.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar, cast

V = TypeVar("V")


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
        self._lock = threading.Lock()

    def slot(self, name: str) -> Slot[V]:
        """The values of memo ``name`` (one per session key)."""
        return Slot(self, name)

    def forget(self, key: str) -> None:
        """Drops everything remembered of session ``key``."""
        with self._lock:
            context = self._contexts.pop(key, None)
            if context is not None:
                self._bytes -= context.nbytes

    def holding(self, name: str) -> int:
        """How many sessions hold a value of memo ``name``."""
        with self._lock:
            return sum(name in context.values for context in self._contexts.values())

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "sessions": len(self._contexts),
                "bytes": self._bytes,
                "max_bytes": self.max_bytes,
                "evictions": self._evictions,
            }

    def value(self, key: str, name: str) -> object | None:
        """Slot ``name`` of session ``key`` (``Slot.get``); the session becomes most recent."""
        with self._lock:
            context = self._contexts.get(key)
            if context is None:
                return None
            self._contexts.move_to_end(key)
            found = context.values.get(name)
            return None if found is None else found[0]

    def store(self, key: str, name: str, value: object, size: int) -> None:
        """Sets slot ``name`` of session ``key``, then evicts down to the budget."""
        with self._lock:
            context = self._contexts.get(key)
            if context is None:
                context = self._contexts[key] = SessionContext()
            self._contexts.move_to_end(key)
            self._remove(context, name)
            if context.nbytes + size > self.max_bytes:
                if not context.values:  # a session larger than the whole budget keeps
                    del self._contexts[key]  # nothing of this call
                return
            context.values[name] = (value, size)
            context.nbytes += size
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, evicted = self._contexts.popitem(last=False)
                self._bytes -= evicted.nbytes
                self._evictions += 1

    def discard(self, key: str, name: str) -> object | None:
        """Removes slot ``name`` of session ``key``; returns its value, if it was there."""
        with self._lock:
            context = self._contexts.get(key)
            if context is None:
                return None
            value = self._remove(context, name)
            if not context.values:
                del self._contexts[key]
            return value

    def _remove(self, context: SessionContext, name: str) -> object | None:
        """Takes slot ``name`` out of ``context`` (under the lock)."""
        found = context.values.pop(name, None)
        if found is None:
            return None
        context.nbytes -= found[1]
        self._bytes -= found[1]
        return found[0]


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
