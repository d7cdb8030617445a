"""Session state shared through Redis, with this process's ``MemoryStore`` in front.

Replicas behind a load balancer share sessions this way: a call that lands on another replica
than the session's previous one finds the state in Redis and repairs from it instead of
encoding the whole transcript.

* **Reads** go to the local tier first; only a local miss asks Redis (one ``HGET``), and a
  good entry is kept locally.  Whatever comes back is decoded by ``store_entry.decode``, which
  turns anything truncated, corrupt or written for another tokenizer into a miss; the diff then
  byte-verifies the stored text against the new one before any id is reused.
* **Writes** are write-behind: ``put`` updates the local tier and queues the state; one writer
  thread encodes it and stores it with a Lua script that keeps the entry only if its version
  (the encode's wall-clock time in ns) is newer than the stored one, and sets the TTL.  So the
  request path never waits on Redis for a write, a queued write is coalesced with the next one
  of the same session, and two replicas writing one session leave the newer encode, each entry
  being exact for its own text.  Pending writes are bounded in bytes; past that the oldest is
  dropped (counted).
* **Faults**: every Redis error (refused, timeout, reset, bad reply) is counted and opens a
  short breaker during which Redis is not asked at all: the proxy serves from the local tier
  or encodes in full, with exact ids and no error to the client.  Sockets time out quickly
  (``timeout``), because a local miss of a continuation call is read on the event loop.

Content lookup (calls without a session key) uses the local tier only.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from app.tokenization import store_entry
from app.tokenization.store import MemoryStore, SessionKey, SessionState

_KEEP_NEWER = """
local stored = redis.call('HGET', KEYS[1], 'v')
if stored and tonumber(stored) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'e', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
"""Store the entry (field e) only if its version (field v) is newer; refresh the TTL."""


class RedisStore:
    """A ``SessionStore``: local LRU tier + Redis, degrading to the local tier on any error."""

    def __init__(
        self,
        url: str,
        *,
        tokenizer: bytes,
        local: MemoryStore,
        ttl_s: float = 86400.0,
        timeout_s: float = 0.1,
        breaker_s: float = 1.0,
        pending_bytes: int = 256 << 20,
        prefix: str = "toksplice",
    ) -> None:
        """``tokenizer`` is ``store_entry.fingerprint`` of the tokenizer.json in use."""
        self.local = local
        self._tokenizer = tokenizer
        self._namespace = f"{prefix}:{tokenizer.hex()}:".encode()
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self._breaker_s = breaker_s
        self._pending_max = pending_bytes
        self._redis = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        self._keep_newer = self._redis.register_script(_KEEP_NEWER)
        self._lock = threading.Condition()
        self._pending: OrderedDict[SessionKey, tuple[int, SessionState | None]] = OrderedDict()
        self._pending_bytes = 0
        self._open_until = 0.0
        self._closing = False
        self._writing = False
        self._counts: Counter[str] = Counter()
        self._writer = threading.Thread(target=self._write_loop, name="redis-store", daemon=True)
        self._writer.start()

    def get(self, key: SessionKey) -> SessionState | None:
        state = self.local.get(key)
        if state is not None or not self._available():
            return state
        try:
            entry = self._redis.hget(self._key(key), "e")
        except redis.RedisError:
            self._failed()
            return None
        if entry is None:
            self._count("misses")
            return None
        state = store_entry.decode(entry, self._tokenizer)  # type: ignore[arg-type]
        if state is None:
            self._count("rejected")
            return None
        self._count("hits")
        self.local.put(key, state)
        return state

    def put(self, key: SessionKey, state: SessionState) -> None:
        self.local.put(key, state)
        if state.nbytes > self.local.max_bytes:
            self._count("refused_oversize")  # as the local tier: over the whole budget
            return
        self._queue(key, state)

    def drop(self, key: SessionKey) -> None:
        self.local.drop(key)
        self._queue(key, None)

    def find_by_content(self, tenant: str, text: bytes) -> tuple[SessionKey, SessionState] | None:
        return self.local.find_by_content(tenant, text)

    def stats(self) -> dict[str, int]:
        with self._lock:
            shared = {f"redis_{name}": n for name, n in self._counts.items()}
            shared["redis_pending"] = len(self._pending)
        return self.local.stats() | shared

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every queued write was attempted; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._pending or self._writing:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    def close(self) -> None:
        """Write what is queued (briefly), stop the writer, close the connections."""
        self.flush(timeout_s=2.0)
        with self._lock:
            self._closing = True
            self._lock.notify_all()
        self._writer.join(timeout=5)
        self._redis.close()

    def _queue(self, key: SessionKey, state: SessionState | None) -> None:
        version = time.time_ns()
        size = state.nbytes if state is not None else 0
        with self._lock:
            old = self._pending.pop(key, None)
            if old is not None:
                self._pending_bytes -= _size(old[1])
                self._counts["coalesced"] += 1
            self._pending[key] = (version, state)
            self._pending_bytes += size
            while self._pending_bytes > self._pending_max and len(self._pending) > 1:
                _, (_, dropped) = self._pending.popitem(last=False)
                self._pending_bytes -= _size(dropped)
                self._counts["writes_dropped"] += 1
            self._lock.notify_all()

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closing:
                    self._lock.wait()
                if self._closing:
                    return
                key, (version, state) = self._pending.popitem(last=False)
                self._pending_bytes -= _size(state)
                self._writing = True
            try:
                self._write(key, version, state)
            finally:
                with self._lock:
                    self._writing = False
                    self._lock.notify_all()

    def _write(self, key: SessionKey, version: int, state: SessionState | None) -> None:
        if not self._available():
            self._count("writes_skipped")
            return
        try:
            if state is None:
                self._redis.delete(self._key(key))
            else:
                entry = store_entry.encode(state, self._tokenizer)
                kept = self._keep_newer(keys=[self._key(key)], args=[version, entry, self._ttl_ms])
                self._count("writes" if kept else "writes_superseded")
        except redis.RedisError:
            self._failed()

    def _key(self, key: SessionKey) -> bytes:
        tenant, session = key
        return self._namespace + tenant.encode() + b"\x00" + session.encode("utf-8", "replace")

    def _available(self) -> bool:
        return time.monotonic() >= self._open_until

    def _failed(self) -> None:
        with self._lock:
            self._counts["errors"] += 1
            self._open_until = time.monotonic() + self._breaker_s

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1


def _size(state: SessionState | None) -> int:
    return 0 if state is None else state.nbytes
