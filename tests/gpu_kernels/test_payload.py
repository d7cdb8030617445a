"""``windows_normalized``, one check of the windows joined, answers as a check of each."""

from __future__ import annotations

import unicodedata

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpu_kernels.payload import windows_normalized
from tests.gpu_kernels.conftest import differential

_NFC_TRAPS = (
    "eEaAo\n <>\u0301\u0300\u0308\u0323\u0338\u1100\u1161\u11a8\uac00\u0b47\u0b3e\u212b\u0958"
)
"""Starters NFC composes, marks it composes or reorders, Hangul jamo, characters it replaces
(Angstrom sign, a composition exclusion), and the newline the joined check puts between."""


@differential(1000)
@given(windows=st.lists(st.text(alphabet=_NFC_TRAPS, max_size=6), max_size=6), data=st.data())
def test_joined_windows_as_each(windows: list[str], data: st.DataObject) -> None:
    """Any windows, in any order, repeated or not: the joined check answers as one per window
    (a window may open with a mark, hold a newline or be empty)."""
    text = "".join(windows).encode()
    ends = np.cumsum([len(w.encode()) for w in windows], dtype=np.int64)
    begins = ends - [len(w.encode()) for w in windows]
    order = data.draw(st.lists(st.sampled_from(range(len(windows))))) if windows else []
    expected = all(unicodedata.is_normalized("NFC", windows[i]) for i in order)
    assert windows_normalized(text, begins[order], ends[order]) is expected


def test_windows_are_not_joined_into_each_other() -> None:
    """``e`` and a lone accent are each in NFC; run together they are not."""
    text = "e\u0301".encode()
    assert windows_normalized(text, np.asarray([0, 1]), np.asarray([1, 3])) is True
    assert windows_normalized(text, np.asarray([0]), np.asarray([3])) is False
