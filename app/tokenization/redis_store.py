"""Session state shared through Redis, with this process's ``MemoryStore`` in front.

Replicas behind a load balancer share sessions this way: a call that lands on another replica
than the session's previous one finds the state in Redis and repairs from it instead of
encoding the whole transcript.

* **Reads** go to the local tier first; only a local miss asks Redis (one ``HGETALL``), and a
  good entry is kept locally.  Whatever comes back is decoded by ``store_delta.decode_chain``,
  which turns anything truncated, corrupt, unlinked or written for another tokenizer into a
  miss; the diff then byte-verifies the stored text against the new one before any id is
  reused.
* **Writes** are write-behind: ``put`` updates the local tier and queues the state; one writer
  thread stores it.  An entry is a hash: ``e`` a base entry (``store_entry``), ``d1``..``dn``
  delta records (``store_delta``), ``h`` the chain digest of the last state, ``v`` its version
  (the encode's wall-clock time in ns).  When the writer still has the state it last stored
  for the session, it sends only a delta against it, appended by a Lua script if ``h`` is
  still that state's digest (else another writer, an eviction or a restart replaced it: the
  state is written whole instead).  A new base replaces the hash once the deltas would
  outweigh it or number ``_MAX_DELTAS``.  Both scripts keep a write only if its version is
  newer than the stored one, and set the TTL: a queued write is coalesced with the next one of
  the same session, and two replicas writing one session leave the newer encode.  Pending
  writes are bounded in bytes; past that the oldest is dropped (counted).
* **Faults**: every Redis error (refused, timeout, reset, bad reply) is counted and opens a
  short breaker during which Redis is not asked at all: the proxy serves from the local tier
  or encodes in full, with exact ids and no error to the client.  Sockets time out quickly
  (``timeout``), because a local miss of a continuation call is read on the event loop.

Content lookup (calls without a session key) uses the local tier only.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from app.tokenization import store_delta, store_entry
from app.tokenization.store import MemoryStore, SessionKey, SessionState

_IF_STALE_RETURN_0 = """
local stored = redis.call('HGET', KEYS[1], 'v')
if stored and (#stored > #ARGV[1] or (#stored == #ARGV[1] and stored >= ARGV[1])) then
  return 0
end
"""
"""Keep only newer writes.  Versions are decimal ns, compared exactly as strings of digits
(a Lua number has 53 bits)."""

_WRITE_BASE = (
    _IF_STALE_RETURN_0
    + """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'h', ARGV[2], 'n', 0, 'e', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""
)
"""Replace the session's entry with a base (ARGV: version, digest, entry, TTL ms)."""

_APPEND_DELTA = (
    _IF_STALE_RETURN_0
    + """
if redis.call('HGET', KEYS[1], 'h') ~= ARGV[2] then return -1 end
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'h', ARGV[3], 'd' .. n, ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"""
)
"""Append a delta if the stored state is its parent (ARGV: version, parent digest, digest,
record, TTL ms): 0 when a newer version is stored, -1 when the parent is not."""

_MAX_DELTAS = 32
"""Records a read applies at most (each one rebuilds the state)."""


@dataclass(frozen=True, slots=True)
class _Head:
    """What this process last stored (or read) for a session: the state, its chain digest, and
    the records written since the base.  Weak: a state the local tier evicted is not kept."""

    state: weakref.ref[SessionState]
    digest: bytes
    deltas: int = 0
    delta_bytes: int = 0


@dataclass(frozen=True, slots=True)
class _Pending:
    version: int
    state: SessionState | None
    """None deletes the session."""
    parent: SessionState | None
    """The session's head when queued, kept alive for the delta."""


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
        self._write_base = self._redis.register_script(_WRITE_BASE)
        self._append_delta = self._redis.register_script(_APPEND_DELTA)
        self._lock = threading.Condition()
        self._pending: OrderedDict[SessionKey, _Pending] = OrderedDict()
        self._heads: dict[SessionKey, _Head] = {}
        self._sweep_at = _SWEEP_MIN
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
            fields: dict[bytes, bytes] = self._redis.hgetall(self._key(key))  # type: ignore[assignment]
        except redis.RedisError:
            self._failed()
            return None
        if not fields:
            self._count("misses")
            return None
        found = self._decode(fields)
        if found is None:
            self._count("rejected")
            return None
        state, head = found
        with self._lock:
            self._counts["hits"] += 1
            self._remember(key, head)
        self.local.put(key, state)
        return state

    def put(self, key: SessionKey, state: SessionState) -> None:
        if state.nbytes > self.local.max_bytes:
            self._count("refused_oversize")  # as the local tier: over the whole budget
        else:
            self._queue(key, state)  # first: it pins the head before the local tier lets go
        self.local.put(key, state)

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

    def _decode(self, fields: dict[bytes, bytes]) -> tuple[SessionState, _Head] | None:
        """The state of an entry's fields, if it is exactly what the writers stored."""
        try:
            count = int(fields[b"n"])
            base, head = fields[b"e"], fields[b"h"]
            records = [fields[b"d%d" % k] for k in range(1, count + 1)]
        except (KeyError, ValueError):
            return None
        if len(fields) != 4 + count:  # v, h, n, e and the records
            return None
        state = store_delta.decode_chain(base, records, head, self._tokenizer)
        if state is None:
            return None
        return state, _Head(weakref.ref(state), head, count, sum(map(len, records)))

    def _queue(self, key: SessionKey, state: SessionState | None) -> None:
        version = time.time_ns()
        with self._lock:
            old = self._pending.pop(key, None)
            if old is not None:
                self._pending_bytes -= _size(old.state)
                self._counts["coalesced"] += 1
            head = self._heads.get(key)
            # The state a delta would apply to must outlive the local tier's copy until then.
            parent = head.state() if head is not None else None
            self._pending[key] = _Pending(version, state, parent)
            self._pending_bytes += _size(state)
            while self._pending_bytes > self._pending_max and len(self._pending) > 1:
                _, dropped = self._pending.popitem(last=False)
                self._pending_bytes -= _size(dropped.state)
                self._counts["writes_dropped"] += 1
            self._lock.notify_all()

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closing:
                    self._lock.wait()
                if self._closing:
                    return
                key, pending = self._pending.popitem(last=False)
                self._pending_bytes -= _size(pending.state)
                self._writing = True
            try:
                self._write(key, pending)
            finally:
                with self._lock:
                    self._writing = False
                    self._lock.notify_all()

    def _write(self, key: SessionKey, pending: _Pending) -> None:
        if not self._available():
            self._count("writes_skipped")
            return
        name, version = self._key(key), str(pending.version)
        try:
            if pending.state is None:
                self._redis.delete(name)
                with self._lock:
                    self._heads.pop(key, None)
            elif not self._write_delta(key, name, version, pending.state, pending.parent):
                entry = store_entry.encode(pending.state, self._tokenizer)
                digest = store_entry.digest(entry)
                kept = self._write_base(keys=[name], args=(version, digest, entry, self._ttl_ms))
                self._wrote(key, kept, _Head(weakref.ref(pending.state), digest), delta=False)
        except redis.RedisError:
            self._failed()

    def _write_delta(
        self,
        key: SessionKey,
        name: bytes,
        version: str,
        state: SessionState,
        parent: SessionState | None,
    ) -> bool:
        """Append a delta against the session's head; False when a base is due instead: no
        head (or not the pinned parent), a chain long or heavy enough, or another head stored."""
        with self._lock:
            head = self._heads.get(key)
        if parent is None or head is None or head.deltas >= _MAX_DELTAS:
            return False
        if head.state() is not parent:
            return False
        record = store_delta.encode(parent, head.digest, state)
        size = head.delta_bytes + len(record)
        if size > _full_size(state):
            return False
        digest = store_delta.digest(record)
        args = (version, head.digest, digest, record, self._ttl_ms)
        kept = self._append_delta(keys=[name], args=args)
        if kept == -1:
            self._count("rebased")
            return False
        self._wrote(key, kept, _Head(weakref.ref(state), digest, head.deltas + 1, size), delta=True)
        return True

    def _wrote(self, key: SessionKey, kept: int, head: _Head, *, delta: bool) -> None:
        with self._lock:
            if kept:
                self._counts["writes"] += 1
                self._counts["deltas"] += delta
                self._remember(key, head)
            else:
                self._counts["writes_superseded"] += 1

    def _remember(self, key: SessionKey, head: _Head) -> None:
        """Record a session's head (lock held); now and then forget those whose state died."""
        self._heads[key] = head
        if len(self._heads) >= self._sweep_at:
            for dead in [k for k, h in self._heads.items() if h.state() is None]:
                del self._heads[dead]
            self._sweep_at = max(_SWEEP_MIN, 2 * len(self._heads))

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


_SWEEP_MIN = 1024


def _size(state: SessionState | None) -> int:
    return 0 if state is None else state.nbytes


def _full_size(state: SessionState) -> int:
    """About a base entry's size: the most a chain's records may add up to before a new base."""
    return len(state.text) + 6 * len(state.ids)
