"""The Redis store's writer sends batches against a real ``redis-server``: queued writes of
many sessions share one pipeline, a session's queued writes coalesce to its newest state, a
write queued while its parent is in flight extends it, and a batch that fails partway (one
error reply, or the connection lost after Redis applied some commands) leaves every session
reading back an exact state, never a wrong one."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from app.sessions.memory import SessionKey
from app.sessions.redis_store import RedisStore
from app.tokenization.state import SessionState
from tests.services import RedisServer
from tests.tokenization.stored_states import KEY, read, same, write


def keys(test: str) -> list[SessionKey]:
    """Three sessions of one test (the server is shared by all tests)."""
    return [("t", f"s:{test}-{k}") for k in range(3)]


def counts(store: RedisStore) -> dict[str, int]:
    return {k.removeprefix("redis_"): v for k, v in store.stats().items() if k[:6] == "redis_"}


def test_writes_of_many_sessions_share_one_round_trip(
    states: list[SessionState], make_store: Callable[..., RedisStore]
) -> None:
    store, sessions = make_store(batch_s=60.0), keys("many")  # the writer waits for a flush
    for key in sessions:
        write(store, states[0], key)
    for k, key in enumerate(sessions):
        store.put(key, states[k + 1])
    assert store.flush()
    reader = make_store()
    for k, key in enumerate(sessions):
        assert same(read(reader, key), states[k + 1])
    found = counts(store)
    assert (found["batches"], found["writes"], found["deltas"]) == (4, 6, 3)


def test_queued_writes_of_a_session_coalesce_to_the_newest(
    states: list[SessionState], make_store: Callable[..., RedisStore]
) -> None:
    """One record from the stored head to the newest state: the states between are never
    stored, and the record holds the tokens all of them appended."""
    store = make_store(batch_s=60.0)
    write(store, states[0])
    for state in states[1:5]:
        store.put(KEY, state)
    assert store.flush()
    assert same(read(make_store()), states[4])
    found = counts(store)
    assert (found["coalesced"], found["writes"], found["deltas"]) == (3, 2, 1)


def test_a_write_queued_while_its_parent_is_in_flight_extends_it(
    states: list[SessionState],
    make_store: Callable[..., RedisStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stored head is still states[0] when states[2] is queued, but states[1] is on its
    way: states[2]'s record names states[1], so no base is written again."""
    store = make_store()
    write(store, states[0])
    send = store._send

    def sending(
        batch: list[tuple[SessionKey, object]], *, deltas: bool
    ) -> list[tuple[SessionKey, object]]:
        if [state for _, state in batch if getattr(state, "state", None) is states[1]]:
            store.put(KEY, states[2])
        return send(batch, deltas=deltas)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_send", sending)
    write(store, states[1])
    assert store.flush()
    assert same(read(make_store()), states[2])
    found = counts(store)
    assert (found["writes"], found["deltas"], found.get("rebased", 0)) == (3, 2, 0)


def test_an_error_reply_fails_only_its_own_write(
    states: list[SessionState],
    make_store: Callable[..., RedisStore],
    redis_server: RedisServer,
) -> None:
    store, (a, b, c) = make_store(batch_s=60.0, breaker_s=0.0), keys("error")
    for key in (a, b, c):
        write(store, states[0], key)
    # b's record is appended by a script whose HINCRBY then fails: not an integer
    redis_server.client().hset(store._key(b), "n", b"not a number")
    for key in (a, b, c):
        store.put(key, states[3])
    assert store.flush()
    reader = make_store()
    assert same(read(reader, a), states[3]) and same(read(reader, c), states[3])
    assert counts(store)["errors"] == 1


@pytest.mark.parametrize("applied", [0, 1, 2, 3])
def test_a_connection_lost_midway_leaves_exact_states(
    states: list[SessionState],
    make_store: Callable[..., RedisStore],
    monkeypatch: pytest.MonkeyPatch,
    applied: int,
) -> None:
    """Redis applies the batch's first ``applied`` writes, then the connection drops before
    any reply: the writer knows none of them, yet every session reads back exactly one of
    its states, and the next writes (records onto a head Redis no longer holds, for the
    applied ones) leave the newest."""
    store, sessions = make_store(batch_s=60.0, breaker_s=0.0), keys(f"midway-{applied}")
    for key in sessions:
        write(store, states[0], key)
    execute = redis.client.Pipeline.execute

    def cut(pipe: redis.client.Pipeline, raise_on_error: bool = True) -> list[object]:
        del pipe.command_stack[applied:]
        execute(pipe, raise_on_error)
        raise redis.ConnectionError("lost midway")

    monkeypatch.setattr(redis.client.Pipeline, "execute", cut)
    for key in sessions:
        store.put(key, states[1])
    assert store.flush()
    monkeypatch.undo()
    assert counts(store)["errors"] == 1
    reader = make_store()
    for k, key in enumerate(sessions):
        assert same(read(reader, key), states[1] if k < applied else states[0]), k
    for key in sessions:
        store.put(key, states[2])
    assert store.flush()
    for key in sessions:
        assert same(read(reader, key), states[2])
    assert counts(store).get("rebased", 0) == applied
