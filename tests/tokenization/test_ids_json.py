"""IdsJson: spliced JSON equals a fresh serialisation, whatever changed between calls."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sessions import ids_json
from app.sessions.ids_json import IdsJson, IdsJsonCache
from app.sessions.registry import SessionRegistry
from app.tokenization.reference import CopiedIds

id_lists = st.lists(st.integers(0, 2_000_000_000), max_size=60)


def _ids(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int32)


def _check(result: IdsJson, values: list[int]) -> None:
    assert json.loads(b"[" + result.text + b"]") == values
    starts = [0, *(int(e) + 1 for e in result.ends[:-1])][: len(values)]
    text = bytes(result.text)
    assert [int(text[s:e]) for s, e in zip(starts, result.ends, strict=True)] == values


@given(id_lists)
def test_fresh_serialisation(values: list[int]) -> None:
    _check(IdsJson.of(_ids(values)), values)


@given(id_lists, st.integers(1, 8))
def test_serialised_a_slice_at_a_time(values: list[int], at_once: int) -> None:
    """Long id lists are serialised ``_AT_ONCE`` ids per call (no call holds the GIL long)."""
    default, ids_json._AT_ONCE = ids_json._AT_ONCE, at_once
    try:
        _check(IdsJson.of(_ids(values)), values)
        _check(IdsJson.of(_ids(values[:3])).spliced(_ids(values)), values)
    finally:
        ids_json._AT_ONCE = default


@settings(max_examples=400)
@given(id_lists, id_lists, id_lists, id_lists)
def test_splice_equals_fresh(
    head: list[int], old_mid: list[int], new_mid: list[int], tail: list[int]
) -> None:
    old = head + old_mid + tail
    new = head + new_mid + tail
    _check(IdsJson.of(_ids(old)).spliced(_ids(new)), new)


@settings(max_examples=300)
@given(id_lists, st.lists(st.tuples(st.integers(0, 70), st.integers(0, 70), id_lists), max_size=5))
def test_splice_of_copied_runs_equals_fresh(
    old: list[int], parts: list[tuple[int, int, list[int]]]
) -> None:
    """New ids built from stretches of the old ones (in order) and fresh ids between."""
    new: list[int] = []
    runs = []
    cursor = 0
    for a, b, fresh in parts:
        first, last = sorted((min(a, len(old)), min(b, len(old))))
        first = max(first, cursor)
        new += fresh
        if first < last:
            runs.append((first, last, len(new)))
            new += old[first:last]
            cursor = last
    old_ids = _ids(old)
    _check(IdsJson.of(old_ids).spliced(_ids(new), CopiedIds(old_ids, tuple(runs))), new)


@given(st.lists(id_lists, min_size=1, max_size=6))
def test_cache_over_a_growing_session(calls: list[list[int]]) -> None:
    cache = IdsJsonCache(SessionRegistry(1 << 20).slot("ids_json"))
    values: list[int] = []
    made = []
    for k, extra in enumerate(calls):
        values = (values[1:] if k % 3 == 2 else values) + extra
        made.append((cache.json_for("t/s", _ids(values)), values))
        for result, expected in made:  # JSON handed out never changes as later calls grow it
            _check(result, expected)


def test_a_splice_that_keeps_the_start_writes_only_what_follows() -> None:
    old_ids = _ids(list(range(1000)))
    old = IdsJson.of(old_ids)
    before = bytes(old.text)
    # The last id is written again (as repair re-encodes a few before its cut): in place.
    new = old.spliced(_ids([*range(1000), 5, 6]), CopiedIds(old_ids, ((0, 999, 0),)))
    _check(new, [*range(1000), 5, 6])
    assert np.shares_memory(np.frombuffer(new.text, np.uint8), np.frombuffer(old.text, np.uint8))
    assert bytes(old.text) == before


def test_cache_evicts_to_its_budget() -> None:
    sessions = SessionRegistry(2_000)
    cache = IdsJsonCache(sessions.slot("ids_json"))
    for k in range(50):
        cache.json_for(f"t/{k}", _ids(list(range(40))))
    stats = sessions.stats()
    assert 0 < stats["bytes"] <= 2_000 and stats["sessions"] < 50
