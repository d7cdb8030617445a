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
  the same session, and two replicas writing one session leave the newer encode.  The writer
  lets writes gather for ``batch_s``, then sends all queued ones in one pipeline (a record
  queued while its parent is being written extends that parent).  Pending writes are bounded
  in bytes; past that the oldest is dropped (counted).
* **Faults**: every Redis error (refused, timeout, reset, bad reply) but one session's key of
  another type (a miss of that session, replaced by its next write) is counted and opens a
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

from app.sessions import store_delta, store_entry
from app.sessions.memory import MemoryStore, SessionKey
from app.tokenization.state import SessionState

_IF_STALE_RETURN_0 = """
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then redis.call('DEL', KEYS[1]) end
local stored = redis.call('HGET', KEYS[1], 'v')
if stored and (#stored > #ARGV[1] or (#stored == #ARGV[1] and stored >= ARGV[1])) then
  return 0
end
"""
"""Keep only newer writes.  Versions are decimal ns, compared exactly as strings of digits
(a Lua number has 53 bits).  A key of another type than a hash is no entry of ours (damage):
the write replaces it."""

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
        batch_s: float = 0.01,
        prefix: str = "toksplice",
    ) -> None:
        """``tokenizer`` is ``store_entry.fingerprint`` of the tokenizer.json in use;
        ``batch_s``: how long the writer lets writes gather before a round trip."""
        self.local = local
        self.registry = local.registry
        self._tokenizer = tokenizer
        self._namespace = f"{prefix}:{tokenizer.hex()}:".encode()
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self._breaker_s = breaker_s
        self._pending_max = pending_bytes
        self._batch_s = batch_s
        self._redis = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        self._lock = threading.Condition()
        self._pending: OrderedDict[SessionKey, _Pending] = OrderedDict()
        self._heads: dict[SessionKey, _Head] = {}
        self._inflight: dict[SessionKey, SessionState | None] = {}
        """The batch being written: a write queued meanwhile extends its state."""
        self._sweep_at = _SWEEP_MIN
        self._pending_bytes = 0
        self._open_until = 0.0
        self._closing = False
        self._flushing = 0
        self._counts: Counter[str] = Counter()
        self._writer = threading.Thread(target=self._write_loop, name="redis-store", daemon=True)
        self._writer.start()

    def get(self, key: SessionKey) -> SessionState | None:
        state = self.local.get(key)
        if state is not None or not self._available():
            return state
        try:
            fields: dict[bytes, bytes] = self._redis.hgetall(self._key(key))  # type: ignore[assignment]
        except redis.RedisError as exc:
            if isinstance(exc, redis.ResponseError) and str(exc).startswith("WRONGTYPE"):
                self._count("rejected")  # this session's key is damaged: its miss alone
            else:
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
            self._flushing += 1
            self._lock.notify_all()
            try:
                while self._pending or self._inflight:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._lock.wait(left)
            finally:
                self._flushing -= 1
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
            # The state a record would apply to (the one being written, else the stored head)
            # must outlive the local tier's copy until then.
            if key in self._inflight:
                parent = self._inflight[key]
            else:
                head = self._heads.get(key)
                parent = head.state() if head is not None else None
            self._pending[key] = _Pending(version, state, parent)
            self._pending_bytes += _size(state)
            while self._pending_bytes > self._pending_max and len(self._pending) > 1:
                _, dropped = self._pending.popitem(last=False)
                self._pending_bytes -= _size(dropped.state)
                self._counts["writes_dropped"] += 1
            if len(self._pending) == 1:
                self._lock.notify_all()  # the writer waits for a first write, not for more

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closing:
                    self._lock.wait()
                # Let a few more writes join this round trip, unless someone waits for them.
                deadline = time.monotonic() + self._batch_s
                while not (self._closing or self._flushing):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._lock.wait(left)
                if self._closing:
                    return
                batch = list(self._pending.items())
                self._pending.clear()
                self._pending_bytes = 0
                self._inflight = {key: pending.state for key, pending in batch}
            try:
                self._write_batch(batch)
            finally:
                with self._lock:
                    self._inflight = {}
                    self._lock.notify_all()

    def _write_batch(self, batch: list[tuple[SessionKey, _Pending]]) -> None:
        """Store a batch in one round trip, and in a second one, whole, the states whose
        records Redis refused (their parent is no longer the stored head)."""
        if not self._available():
            self._count("writes_skipped", len(batch))
            return
        try:
            rebase = self._send(batch, deltas=True)
            if rebase:
                self._send(rebase, deltas=False)
        except redis.RedisError:
            self._failed()

    def _send(
        self, batch: list[tuple[SessionKey, _Pending]], *, deltas: bool
    ) -> list[tuple[SessionKey, _Pending]]:
        """One pipeline of the batch's writes; returns those whose record Redis refused.

        A reply that is an error fails only its own write (counted, breaker opened); a
        connection lost midway raises, and no head moves: writes Redis did apply are then
        unknown here, so the next record of those sessions names a parent Redis no longer
        holds and is refused, and the state is written whole."""
        with self._lock:
            heads = [self._heads.get(key) if deltas else None for key, _ in batch]
        pipe = self._redis.pipeline(transaction=False)
        after = [
            self._command(pipe, key, p, head) for (key, p), head in zip(batch, heads, strict=True)
        ]
        replies = pipe.execute(raise_on_error=False)
        rebase = []
        errors = 0
        with self._lock:
            self._counts["batches"] += 1
            for (key, pending), head, reply in zip(batch, after, replies, strict=True):
                if isinstance(reply, Exception):
                    errors += 1
                elif head is None:
                    self._heads.pop(key, None)
                elif reply == -1:
                    self._counts["rebased"] += 1
                    rebase.append((key, pending))
                elif reply:
                    self._counts["writes"] += 1
                    self._counts["deltas"] += head.deltas > 0
                    self._remember(key, head)
                else:
                    self._counts["writes_superseded"] += 1
        if errors:
            self._failed(errors)
        return rebase

    def _command(
        self, pipe: redis.client.Pipeline, key: SessionKey, pending: _Pending, head: _Head | None
    ) -> _Head | None:
        """Queue one write: a delete, a record onto ``head`` when one is due, else the state
        whole.  Returns the head the write leaves (None: deleted)."""
        name, version, state = self._key(key), str(pending.version), pending.state
        if state is None:
            pipe.delete(name)
            return None
        record = _record(head, state, pending.parent)
        if head is not None and record is not None:
            after = _Head(
                weakref.ref(state),
                store_delta.digest(record),
                head.deltas + 1,
                head.delta_bytes + len(record),
            )
            args = (version, head.digest, after.digest, record, self._ttl_ms)
            pipe.eval(_APPEND_DELTA, 1, name, *args)
            return after
        entry = store_entry.encode(state, self._tokenizer)
        digest = store_entry.digest(entry)
        pipe.eval(_WRITE_BASE, 1, name, version, digest, entry, self._ttl_ms)
        return _Head(weakref.ref(state), digest)

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

    def _failed(self, errors: int = 1) -> None:
        with self._lock:
            self._counts["errors"] += errors
            self._open_until = time.monotonic() + self._breaker_s

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n


_SWEEP_MIN = 1024


def _size(state: SessionState | None) -> int:
    return 0 if state is None else state.nbytes


def _record(head: _Head | None, state: SessionState, parent: SessionState | None) -> bytes | None:
    """The record that extends ``head`` to ``state``, or None when a base is due instead: no
    head (or not the pinned parent), a chain long or heavy enough."""
    if parent is None or head is None or head.deltas >= _MAX_DELTAS or head.state() is not parent:
        return None
    record = store_delta.encode(parent, head.digest, state)
    return record if head.delta_bytes + len(record) <= _full_size(state) else None


def _full_size(state: SessionState) -> int:
    """About a base entry's size: the most a chain's records may add up to before a new base."""
    return len(state.text) + 6 * len(state.ids)
