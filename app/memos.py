"""What a per-session memo needs from the place that keeps it (``app.sessions`` keeps them all).

A memo remembers something of a session's previous call to make the next one cheaper; it
stores one value per session key and says what the value costs in bytes.  The keeper may
drop any value at any time (eviction): a memo must give the same result without it.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

V = TypeVar("V")


class Memos(Protocol[V]):
    """One memo's values, by session key."""

    def get(self, key: str) -> V | None: ...

    def put(self, key: str, value: V, size: int) -> None: ...

    def drop(self, key: str) -> V | None: ...
