"""The Redis-shared session store against a real ``redis-server``: entries round-trip, anything
damaged is a miss, replicas that share a session stay exact and repair after a move, and a
Redis that is down or restarts costs reuse, never an error or a wrong id."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.sessions import SessionTokenizer, store_entry
from app.sessions.memory import MemoryStore
from app.sessions.redis_store import RedisStore
from app.tokenization.state import SessionState
from loadtest.agent_sessions import MARKUPS, session_calls
from tests.adversarial import grown_texts
from tests.services import RedisServer, free_port
from tests.tokenization.stored_states import FINGERPRINT, same, state_of

# --- the entry format ----------------------------------------------------------------


def test_entries_round_trip_and_any_damage_is_a_miss(
    reference: Callable[[str], Tokenizer],
) -> None:
    ref = reference("qwen3")

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(grown_texts(), st.data())
    def run(versions: list[str], data: st.DataObject) -> None:
        check_entry(state_of(ref, versions[-1]), data)

    run()


def check_entry(state: SessionState, data: st.DataObject) -> None:
    entry = store_entry.encode(state, FINGERPRINT)
    assert same(store_entry.decode(entry, FINGERPRINT), state)
    assert store_entry.decode(entry, b"\x02" * 8) is None  # another tokenizer's entry
    cut = data.draw(st.integers(0, len(entry) - 1), label="truncated at")
    assert store_entry.decode(entry[:cut], FINGERPRINT) is None
    assert store_entry.decode(entry + b"\x00", FINGERPRINT) is None
    at = data.draw(st.integers(0, len(entry) - 1), label="flipped byte")
    bit = data.draw(st.integers(0, 7), label="bit")
    damaged = bytearray(entry)
    damaged[at] ^= 1 << bit
    assert store_entry.decode(bytes(damaged), FINGERPRINT) is None


def test_long_tokens_keep_int32_ends() -> None:
    text = b"x" * 70_000 + b"y"
    state = SessionState(text, np.asarray([7, 8], np.int32), np.asarray([70_000, 70_001], np.int32))
    entry = store_entry.encode(state, FINGERPRINT)
    assert entry[5] == 0  # not the uint16-length form
    assert same(store_entry.decode(entry, FINGERPRINT), state)
    empty = SessionState(b"", np.zeros(0, np.int32), np.zeros(0, np.int32))
    assert same(store_entry.decode(store_entry.encode(empty, FINGERPRINT), FINGERPRINT), empty)


# --- replicas sharing sessions -------------------------------------------------------------


def test_replicas_share_sessions_exactly(
    assets: dict[str, Path],
    reference: Callable[[str], Tokenizer],
    make_store: Callable[..., RedisStore],
) -> None:
    """Three replicas take the calls of four agent sessions in a random order; every call is
    exact, no call after a session's first is a full encode (the first may itself repair from
    another session of the tenant, found by content), and each replica's first call of a
    session it has not seen yet is a Redis hit.  Later visits use the replica's local tier,
    which may be older than Redis: a smaller base, still byte-verified."""
    ref = reference("qwen3")
    stores = [make_store() for _ in range(3)]
    replicas = [SessionTokenizer.from_file(assets["qwen3"], store=s) for s in stores]
    rng = np.random.default_rng(7)
    first_visits = 0
    seen: set[tuple[int, int]] = set()
    for seed in range(4):
        session = f"tenant/agent-{seed}"
        calls = session_calls(
            seed, MARKUPS["qwen3"], target_chars=30_000, billing_line=seed % 2 == 1
        )
        for k, text in enumerate(calls):
            at = int(rng.integers(3))
            first_visits += k > 0 and (at, seed) not in seen
            seen.add((at, seed))
            enc = replicas[at].encode(text, session=session)
            assert list(enc.ids) == ref.encode(text, add_special_tokens=False).ids
            assert k == 0 or enc.route != "full", (k, enc.route, enc.fallback)
            stores[at].flush()
    hits = sum(s.stats().get("redis_hits", 0) for s in stores)
    assert hits == first_visits > 4 and not any(s.stats().get("redis_errors") for s in stores)


def test_adversarial_sessions_alternating_between_replicas(
    assets: dict[str, Path],
    reference: Callable[[str], Tokenizer],
    make_store: Callable[..., RedisStore],
) -> None:
    """Hypothesis: texts whose token boundaries move (``grown_texts``), each version encoded
    by whichever of two replicas the drawn order says, through Redis: always exact."""
    ref = reference("qwen3")
    stores = [make_store(), make_store()]
    replicas = [SessionTokenizer.from_file(assets["qwen3"], store=s, window=64) for s in stores]
    counter = itertools.count()

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(grown_texts(), st.lists(st.integers(0, 1), min_size=1, max_size=8))
    def run(versions: list[str], order: list[int]) -> None:
        session = f"t/h{next(counter)}"
        for k, text in enumerate(versions):
            at = order[k % len(order)]
            enc = replicas[at].encode(text, session=session)
            assert list(enc.ids) == ref.encode(text, add_special_tokens=False).ids, (k, at)
            stores[at].flush()

    run()
    assert sum(s.stats().get("redis_hits", 0) for s in stores) > 20


@pytest.mark.parametrize("damage", ["truncate", "flip", "other-tokenizer", "garbage"])
def test_damaged_entries_are_misses(
    assets: dict[str, Path],
    reference: Callable[[str], Tokenizer],
    make_store: Callable[..., RedisStore],
    redis_server: RedisServer,
    damage: str,
) -> None:
    ref = reference("qwen3")
    writer, reader = make_store(), make_store()
    first = SessionTokenizer.from_file(assets["qwen3"], store=writer)
    second = SessionTokenizer.from_file(assets["qwen3"], store=reader)
    texts = list(session_calls(3, MARKUPS["qwen3"], target_chars=20_000, max_calls=2))
    session = f"t/{damage}"
    first.encode(texts[0], session=session)
    writer.flush()
    client = redis_server.client()
    (key,) = client.keys(b"*" + session.split("/")[1].encode())
    entry = client.hget(key, "e")
    assert isinstance(entry, bytes)
    damaged = {
        "truncate": entry[: len(entry) - 3],
        "flip": entry[:-10] + bytes([entry[-10] ^ 4]) + entry[-9:],
        "other-tokenizer": store_entry.encode(
            store_entry.decode(entry, FINGERPRINT) or pytest.fail("undecodable"), b"\x09" * 8
        ),
        "garbage": b"TKS1" + b"\x00" * 60,
    }[damage]
    client.hset(key, "e", damaged)
    enc = second.encode(texts[1], session=session)
    assert list(enc.ids) == ref.encode(texts[1], add_special_tokens=False).ids
    assert enc.route == "full"
    assert reader.stats()["redis_rejected"] == 1


def test_concurrent_writers_leave_the_newest_self_consistent_entry(
    reference: Callable[[str], Tokenizer], make_store: Callable[..., RedisStore]
) -> None:
    ref = reference("qwen3")
    texts = list(session_calls(5, MARKUPS["qwen3"], target_chars=20_000))
    states = [state_of(ref, t) for t in texts]
    stores = [make_store() for _ in range(4)]
    key = ("t", "s:race")

    def write(store: RedisStore, order: list[int]) -> None:
        for k in order:
            store.put(key, states[k])

    orders = [list(np.random.default_rng(s).permutation(len(states))) for s in range(4)]
    threads = [
        threading.Thread(target=write, args=(s, o)) for s, o in zip(stores, orders, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for store in stores:
        assert store.flush()
    reader = make_store()
    stored = reader.get(key)
    assert stored is not None and any(same(stored, s) for s in states)
    last_written = [order[-1] for order in orders]
    assert any(same(stored, states[k]) for k in last_written)


def test_entries_expire(
    reference: Callable[[str], Tokenizer], make_store: Callable[..., RedisStore]
) -> None:
    state = state_of(reference("qwen3"), "hello world")
    writer = make_store(ttl_s=0.2)
    writer.put(("t", "s:ttl"), state)
    writer.flush()
    assert same(make_store().get(("t", "s:ttl")), state)
    threading.Event().wait(0.5)
    assert make_store().get(("t", "s:ttl")) is None


# --- Redis down or restarted ------------------------------------------------------------


def test_redis_down_or_restarted_degrades_without_errors(
    assets: dict[str, Path],
    reference: Callable[[str], Tokenizer],
    make_store: Callable[..., RedisStore],
) -> None:
    ref = reference("qwen3")
    server = RedisServer()
    server.start()
    try:
        stores = [make_store(server.url, breaker_s=0.05) for _ in range(2)]
        replicas = [SessionTokenizer.from_file(assets["qwen3"], store=s) for s in stores]
        texts = list(session_calls(11, MARKUPS["qwen3"], target_chars=40_000))
        routes = []
        for k, text in enumerate(texts):
            if k == len(texts) // 3:
                server.stop()
            if k == 2 * len(texts) // 3:
                server.start()  # empty again: no persistence
                threading.Event().wait(0.1)  # past the breaker
            at = k % 2
            enc = replicas[at].encode(text, session="t/down")
            assert list(enc.ids) == ref.encode(text, add_special_tokens=False).ids
            routes.append(enc.route)
            stores[at].flush()
        errors = sum(s.stats().get("redis_errors", 0) for s in stores)
        assert errors > 0
        # With Redis gone each replica repairs from its own last state; once Redis is back,
        # writes resume: a replica that never saw the session repairs from Redis.
        assert routes.count("full") == 1
        late = SessionTokenizer.from_file(assets["qwen3"], store=make_store(server.url))
        assert late.encode(texts[-1], session="t/down").route == "hit"
    finally:
        server.stop()


def test_no_redis_at_all(assets: dict[str, Path], make_store: Callable[..., RedisStore]) -> None:
    store = make_store(f"redis://127.0.0.1:{free_port()}/0")
    tok = SessionTokenizer.from_file(assets["qwen3"], store=store)
    texts = list(session_calls(2, MARKUPS["qwen3"], target_chars=30_000, max_calls=3))
    assert [tok.encode(t, session="t/x").route for t in texts[:3]] == ["full", "append", "append"]
    assert store.stats()["redis_errors"] >= 1


def test_states_over_the_budget_are_not_shared(
    reference: Callable[[str], Tokenizer], make_store: Callable[..., RedisStore]
) -> None:
    small, big = (state_of(reference("qwen3"), "word " * n) for n in (10, 2000))
    store = make_store(local=MemoryStore(small.nbytes + 100))
    store.put(("t", "s:small"), small)
    store.put(("t", "s:big"), big)
    store.flush()
    other = make_store()
    assert same(other.get(("t", "s:small")), small)
    assert other.get(("t", "s:big")) is None
    assert store.stats()["redis_refused_oversize"] == 1
