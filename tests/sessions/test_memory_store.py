"""The token states as a slot of the session contexts: one LRU, one budget, and a content index
that never outlives the context its state was evicted with."""

from __future__ import annotations

from typing import cast

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sessions.memory import SLOT, MemoryStore, SessionKey, context_key
from app.sessions.registry import SessionRegistry
from app.tokenization.state import SessionState


def state(text: bytes) -> SessionState:
    """A state of ``text`` (the store never reads the ids: it keeps and indexes texts)."""
    return SessionState(text, np.zeros(0, np.int32), np.zeros(0, np.int32))


def text_of(n: int) -> bytes:
    """Distinct texts that share nothing in the 256 bytes before an anchor."""
    return bytes([n]) * 300 + b"%d" % n


def test_evicting_a_context_drops_its_state_and_its_content_lookup() -> None:
    small = state(text_of(1))
    registry = SessionRegistry(small.nbytes + 100)
    store = MemoryStore(registry=registry)
    body = registry.slot("body")
    key: SessionKey = ("t", "s:a")
    store.put(key, small)
    body.put(context_key(key), "the body of a", 50)
    assert store.find_by_content("t", small.text + b" more") == (key, small)
    registry.slot("body").put("t/s:b", "the body of b", 60)  # "t/s:a" goes, whole
    assert store.get(key) is None and body.get("t/s:a") is None
    assert store.find_by_content("t", small.text + b" more") is None
    stats = store.stats()
    assert (stats["sessions"], stats["bytes"], stats["evictions"]) == (0, 0, 1)
    assert stats["contexts"] == stats["context_evictions"] == 1


def test_a_session_state_is_a_slot_of_the_sessions_context() -> None:
    registry = SessionRegistry(1 << 20)
    store = MemoryStore(registry=registry)
    one = state(text_of(2))
    store.put(("t", "s:conv"), one)
    assert registry.value("t/s:conv", SLOT) is not None
    assert registry.stats()["bytes"] == one.nbytes
    registry.forget("t/s:conv")
    assert store.get(("t", "s:conv")) is None and store.find_by_content("t", one.text) is None


def test_a_state_over_the_budget_with_the_sessions_memos_is_refused() -> None:
    big = state(text_of(3))
    registry = SessionRegistry(big.nbytes + 10)
    store = MemoryStore(registry=registry)
    registry.slot("body").put("t/s:a", "body", 20)
    store.put(("t", "s:a"), big)  # fits the budget alone, not beside the body
    assert store.get(("t", "s:a")) is None and store.stats()["refused_oversize"] == 1
    assert registry.slot("body").get("t/s:a") == "body"


def test_keys_of_one_context_never_read_each_others_state() -> None:
    """("a/b", "c") and ("a", "b/c") name one context; the state keeps its own key."""
    store = MemoryStore(1 << 20)
    store.put(("a/b", "c"), state(text_of(4)))
    assert store.get(("a", "b/c")) is None and store.get(("a/b", "c")) is not None


_KEYS = st.sampled_from([("t", "s:a"), ("t", "s:b"), ("u", "s:a"), ("t", "c:1")])
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), _KEYS, st.integers(0, 5)),
        st.tuples(st.just("memo"), _KEYS, st.integers(0, 400)),
        st.tuples(st.just("get"), _KEYS, st.just(0)),
        st.tuples(st.just("drop"), _KEYS, st.just(0)),
        st.tuples(st.just("forget"), _KEYS, st.just(0)),
    ),
    max_size=50,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_states_and_memos_share_one_budget(ops: list[tuple[str, SessionKey, int]]) -> None:
    """Against a model: an ordered dict of contexts, each a dict of slots (the token state and
    a memo), evicted whole, least recent first, within one budget; the content lookup finds
    exactly the states still held, and the token figures add up."""
    states = [state(text_of(n + 10)) for n in range(6)]
    budget = 2 * states[0].nbytes + 300
    registry = SessionRegistry(budget)
    store = MemoryStore(registry=registry)
    memo = registry.slot("memo")
    model: dict[str, dict[str, tuple[object, int]]] = {}

    def fits(context: str, slot: str, size: int) -> None:
        values = model.pop(context, {})
        values.pop(slot, None)
        if sum(s for _, s in values.values()) + size > budget:
            if values:
                model[context] = values
            return
        model[context] = values
        values[slot] = (n, size)
        while sum(s for c in model.values() for _, s in c.values()) > budget:
            del model[next(iter(model))]

    for n, (op, key, arg) in enumerate(ops):
        context = context_key(key)
        if op == "put":
            fits(context, SLOT, states[arg].nbytes)
            if SLOT in model.get(context, {}):
                model[context][SLOT] = (states[arg], states[arg].nbytes)
            store.put(key, states[arg])
        elif op == "memo":
            fits(context, "memo", arg)
            memo.put(context, n, arg)
        elif op == "get":
            if context in model:
                model[context] = model.pop(context)
            found = model.get(context, {}).get(SLOT)
            assert store.get(key) is (None if found is None else found[0])
        elif op == "drop":
            model.get(context, {}).pop(SLOT, None)
            if context in model and not model[context]:
                del model[context]
            store.drop(key)
        else:
            model.pop(context, None)
            registry.forget(context)
        held = {c: cast(SessionState, v[SLOT][0]) for c, v in model.items() if SLOT in v}
        stats = store.stats()
        used = sum(s for c in model.values() for _, s in c.values())
        assert stats["context_bytes"] == used <= budget
        assert stats["sessions"] == len(held)
        assert stats["bytes"] == sum(s.nbytes for s in held.values())
        for tenant in ("t", "u"):
            for one in states:
                found = store.find_by_content(tenant, one.text)
                mine = [c for c, s in held.items() if s is one and c.startswith(tenant + "/")]
                assert (found is not None) == bool(mine)
                if found is not None:
                    assert found[1] is one and context_key(found[0]) in mine
