"""Delta writes against a real ``redis-server``: continuation calls send records, a record whose
base is gone or replaced becomes a whole write, a stale writer never wins, torn or partial
entries are misses, and any sequence of writes, reads and faults reads back as a miss or as
exactly the last state written."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.sessions import redis_store
from app.sessions.memory import SessionKey
from app.sessions.redis_store import RedisStore
from app.tokenization.state import SessionState
from loadtest.agent_sessions import MARKUPS, session_calls
from tests.adversarial import grown_texts
from tests.services import RedisServer
from tests.tokenization.stored_states import KEY, read, same, state_of, write

OTHER: SessionKey = ("t", "s:other")


def fields(redis_server: RedisServer, key: SessionKey = KEY) -> tuple[bytes, dict[bytes, bytes]]:
    client = redis_server.client()
    (name,) = client.keys(b"*" + key[1].encode())
    return name, client.hgetall(name)  # type: ignore[return-value]


def test_continuation_calls_write_records(
    states: list[SessionState],
    make_store: Callable[..., RedisStore],
    redis_server: RedisServer,
) -> None:
    store, reader = make_store(), make_store()
    for k, state in enumerate(states):
        write(store, state)
        assert same(read(reader), state), k
    _, stored = fields(redis_server)
    assert int(stored[b"n"]) == len(states) - 1
    whole = len(states[-1].text) + 6 * len(states[-1].ids)  # about a base of the last state
    assert sum(len(v) for f, v in stored.items() if f[:1] == b"d") < whole
    counts = store.stats()
    assert counts["redis_deltas"] == len(states) - 1 and counts["redis_writes"] == len(states)


def test_a_long_chain_is_replaced_by_a_base(
    states: list[SessionState], make_store: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    """Tiny records (the same state again), so the count bounds the chain, not its bytes."""
    store, last = make_store(), states[-1]
    for _ in range(redis_store._MAX_DELTAS + 5):
        write(store, SessionState(last.text, last.ids.copy(), last.ends.copy()))
    # A base, _MAX_DELTAS records, a base again and three records.
    _, stored = fields(redis_server)
    assert int(stored[b"n"]) == 3
    assert store.stats()["redis_deltas"] == redis_store._MAX_DELTAS + 3
    assert same(read(make_store()), last)


def test_a_record_whose_base_is_gone_is_written_whole(
    states: list[SessionState], make_store: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    store = make_store()
    write(store, states[0])
    write(store, states[1])
    name, _ = fields(redis_server)
    redis_server.client().delete(name)  # evicted (or Redis restarted)
    write(store, states[2])
    assert same(read(make_store()), states[2])
    assert store.stats()["redis_rebased"] == 1


def test_a_record_whose_base_was_replaced_is_written_whole(
    states: list[SessionState], make_store: Callable[..., RedisStore]
) -> None:
    """Replica A writes, B writes a newer state whole (it moved there), A writes again: A's
    record would apply to a state Redis no longer holds, so A writes its state whole."""
    a, b, reader = make_store(), make_store(), make_store()
    write(a, states[0])
    write(a, states[1])
    write(b, states[5])
    assert same(read(reader), states[5])
    write(a, states[2])
    assert same(read(reader), states[2])
    assert a.stats()["redis_rebased"] == 1


def test_a_stale_writer_never_wins(
    states: list[SessionState],
    make_store: Callable[..., RedisStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Writes queued before the stored one (their versions are older) arrive after it: a
    record onto its own parent and a whole state alike are superseded."""
    a, b = make_store(), make_store()
    write(a, states[0])
    write(a, states[4])  # a record: a's head is now states[4], as stored
    now = redis_store.time.time_ns
    monkeypatch.setattr(redis_store.time, "time_ns", lambda: now() - 10**9)  # queued 1 s ago
    write(a, states[5])  # a record onto the stored head, but older
    write(b, states[6])  # whole (b has no head), older too
    monkeypatch.undo()
    assert same(read(make_store()), states[4])
    assert a.stats()["redis_writes_superseded"] == b.stats()["redis_writes_superseded"] == 1


@pytest.mark.parametrize(
    "damage",
    [
        "a record missing",
        "a record truncated",
        "records swapped",
        "count too high",
        "another head",
        "base missing",
        "base replaced",
        "an extra field",
    ],
)
def test_torn_or_partial_entries_are_misses(
    states: list[SessionState],
    make_store: Callable[..., RedisStore],
    redis_server: RedisServer,
    damage: str,
) -> None:
    store = make_store()
    for state in states[:4]:
        write(store, state)
    name, stored = fields(redis_server)
    client = redis_server.client()
    write(make_store(), states[7], OTHER)
    _, other = fields(redis_server, OTHER)
    change: dict[bytes, bytes] = {
        "a record missing": {},
        "a record truncated": {b"d3": stored[b"d3"][:-1]},
        "records swapped": {b"d1": stored[b"d2"], b"d2": stored[b"d1"]},
        "count too high": {b"n": b"4"},
        "another head": {b"h": other[b"h"]},
        "base missing": {},
        "base replaced": {b"e": other[b"e"]},
        "an extra field": {b"x": b"1"},
    }[damage]
    if change:
        client.hset(name, mapping=change)  # type: ignore[arg-type]
    else:
        client.hdel(name, b"d2" if damage == "a record missing" else b"e")
    reader = make_store()
    assert reader.get(KEY) is None
    assert reader.stats()["redis_rejected"] == 1


def test_records_refresh_the_ttl(
    states: list[SessionState], make_store: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    store = make_store(ttl_s=100)
    write(store, states[0])
    name, _ = fields(redis_server)
    client = redis_server.client()
    client.pexpire(name, 1000)
    write(store, states[1])
    assert client.pttl(name) > 50_000


_PUT = st.tuples(st.just("put"), st.sampled_from([0, 0, 0, 1, 2]), st.integers(0, 6))
_OPS = st.one_of(
    _PUT,
    _PUT,
    _PUT,
    st.tuples(st.just("read"), st.just(0), st.just(0)),
    st.tuples(st.just("evict"), st.just(0), st.just(0)),
    st.tuples(st.just("forget locally"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("drop"), st.integers(0, 2), st.just(0)),
)


def test_any_sequence_reads_back_a_miss_or_the_last_write(
    reference: Callable[[str], Tokenizer],
    make_store: Callable[..., RedisStore],
    redis_server: RedisServer,
) -> None:
    """Three replicas put versions of one session (a ~4K-character opening, then
    ``grown_texts``: appends, edits, cuts) in any order, with evictions, local-tier losses (the
    writer's head state dies: a base next) and session drops between them.  A reader finds
    exactly the last state put, or a miss exactly when an eviction or drop came after it;
    never another state, never a rejected entry."""
    ref = reference("qwen3")
    writers, reader = [make_store() for _ in range(3)], make_store()
    client = redis_server.client()
    counter = itertools.count()
    # A shared opening makes records worth writing (a base is smaller for a short text).
    opening = next(session_calls(9, MARKUPS["qwen3"], target_chars=4_000))

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(grown_texts(), st.lists(_OPS, min_size=6, max_size=16))
    def run(versions: list[str], ops: list[tuple[str, int, int]]) -> None:
        pool = [state_of(ref, opening + v) for v in versions]
        key: SessionKey = ("t", f"s:any-{next(counter)}")
        last: SessionState | None = None
        for op, w, k in ops:
            if op == "put":
                # A fresh copy: the writers' heads hold states weakly, as in the proxy.
                state = pool[k % len(pool)]
                write(
                    writers[w], SessionState(state.text, state.ids.copy(), state.ends.copy()), key
                )
                last = state
            elif op == "evict":
                for name in client.keys(b"*" + key[1].encode()):
                    client.delete(name)
                last = None
            elif op == "forget locally":
                writers[w].local.drop(key)
            elif op == "drop":
                writers[w].drop(key)
                assert writers[w].flush()
                last = None
            found = read(reader, key)
            assert found is None if last is None else same(found, last), (op, w, k)

    run()
    counts = [s.stats() for s in [*writers, reader]]
    assert not any(c.get("redis_rejected") or c.get("redis_errors") for c in counts)
    assert sum(c.get("redis_deltas", 0) for c in counts) >= 20
    assert sum(c.get("redis_rebased", 0) for c in counts) >= 5
