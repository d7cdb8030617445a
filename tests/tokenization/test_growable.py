"""Growable arrays: extensions equal plain concatenation, in place only when no view can see it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tokenization.growable import Growable


def _ints(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int32)


def test_an_extension_writes_after_the_view_in_place() -> None:
    base = Growable.of((_ints([1, 2, 3]), _ints([10, 20, 30])))
    grown = base.extended(2, ([_ints([3, 4]), _ints([5])], [_ints([30, 40, 50])]))
    ids, ends = grown.views
    assert ids.tolist() == [1, 2, 3, 4, 5] and ends.tolist() == [10, 20, 30, 40, 50]
    assert np.shares_memory(ids, base.views[0]) and np.shares_memory(ends, base.views[1])
    assert base.views[0].tolist() == [1, 2, 3] and not ids.flags.writeable


def test_the_room_after_a_view_is_taken_once() -> None:
    base = Growable.of((_ints([1, 2, 3]),))
    first = base.extended(3, ([_ints([4])],))
    second = base.extended(3, ([_ints([9])],))  # a concurrent call from the same state
    assert first.views[0].tolist() == [1, 2, 3, 4]
    assert second.views[0].tolist() == [1, 2, 3, 9]
    assert not np.shares_memory(second.views[0], base.views[0])


def test_new_values_that_disagree_with_the_view_are_copied() -> None:
    base = Growable.of((_ints([1, 2, 3]),))
    grown = base.extended(2, ([_ints([7, 8])],))  # 7 would overwrite the view's 3
    assert grown.views[0].tolist() == [1, 2, 7, 8] and base.views[0].tolist() == [1, 2, 3]
    assert not np.shares_memory(grown.views[0], base.views[0])
    assert base.extended(3, ([_ints([4])],)).views[0].tolist() == [1, 2, 3, 4]  # room still free


_steps = st.lists(
    st.tuples(
        st.integers(0, 1000),  # which earlier array to extend (modulo their number)
        st.floats(0, 1),  # how much of it to keep
        st.lists(st.lists(st.integers(0, 3), max_size=40), max_size=3),  # tail pieces
    ),
    max_size=40,
)


@given(_steps)
@settings(max_examples=300)
def test_extensions_equal_concatenation_and_never_change_a_view(
    steps: list[tuple[int, float, list[list[int]]]],
) -> None:
    made = [(Growable.of((_ints([0, 1, 2]), _ints([5, 6, 7]))), [0, 1, 2])]
    for pick, fraction, pieces in steps:
        base, values = made[pick % len(made)]
        keep = int(fraction * len(values))
        tail = [_ints(p) for p in pieces]
        grown = base.extended(keep, (tail, [t + 5 for t in tail]))
        expected = values[:keep] + [v for p in pieces for v in p]
        made.append((grown, expected))
        for growable, snapshot in made:  # every array handed out is still what it was
            ids, ends = growable.views
            assert ids.tolist() == snapshot and (ends - 5).tolist() == snapshot
