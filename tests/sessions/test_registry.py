"""The session registry: one LRU over sessions, whole contexts evicted, within one budget."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from app.sessions.registry import SessionRegistry

_KEYS = st.sampled_from(["a", "b", "c", "d"])
_SLOTS = st.sampled_from(["body", "render", "ids"])
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), _KEYS, _SLOTS, st.integers(0, 120)),
        st.tuples(st.just("get"), _KEYS, _SLOTS, st.just(0)),
        st.tuples(st.just("drop"), _KEYS, _SLOTS, st.just(0)),
        st.tuples(st.just("forget"), _KEYS, _SLOTS, st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_the_registry_is_an_lru_of_whole_sessions(ops: list[tuple[str, str, str, int]]) -> None:
    """Against a model: an ordered dict of sessions, each a dict of slots; a put makes its
    session most recent and evicts least recent sessions, whole, down to the budget; a get
    that finds the session makes it most recent."""
    budget = 200
    registry = SessionRegistry(budget)
    model: OrderedDict[str, dict[str, tuple[int, int]]] = OrderedDict()
    for n, (op, key, name, size) in enumerate(ops):
        slot = registry.slot(name)
        if op == "put":
            context = model.setdefault(key, {})
            model.move_to_end(key)
            context.pop(name, None)
            if sum(s for _, s in context.values()) + size <= budget:
                context[name] = (n, size)
                while sum(s for c in model.values() for _, s in c.values()) > budget:
                    model.popitem(last=False)
            elif not context:
                del model[key]
            slot.put(key, n, size)
        elif op == "get":
            if key in model:
                model.move_to_end(key)
            found = model.get(key, {}).get(name)
            assert slot.get(key) == (None if found is None else found[0])
        elif op == "drop":
            found = model.get(key, {}).pop(name, None)
            if key in model and not model[key]:
                del model[key]
            assert slot.drop(key) == (None if found is None else found[0])
        else:
            model.pop(key, None)
            registry.forget(key)
        stats = registry.stats()
        assert stats["sessions"] == len(model)
        assert stats["bytes"] == sum(s for c in model.values() for _, s in c.values()) <= budget
        for name in ("body", "render", "ids"):
            assert registry.holding(name) == sum(name in c for c in model.values())


def test_a_session_keeps_its_memos_together() -> None:
    """Eviction takes a session's memos together: none outlives the others."""
    registry = SessionRegistry(100)
    body, ids = registry.slot("body"), registry.slot("ids")
    body.put("a", "body of a", 30)
    ids.put("a", "ids of a", 30)
    body.put("b", "body of b", 30)
    ids.put("b", "ids of b", 30)  # over budget: "a", the least recent session, goes whole
    assert body.get("a") is None and ids.get("a") is None
    assert (body.get("b"), ids.get("b")) == ("body of b", "ids of b")


def test_a_session_larger_than_the_budget_keeps_nothing_new() -> None:
    registry = SessionRegistry(100)
    body = registry.slot("body")
    body.put("a", "small", 10)
    body.put("a", "huge", 101)
    assert body.get("a") is None and registry.stats()["sessions"] == 0
