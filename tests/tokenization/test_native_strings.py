"""The native common prefix and suffix of two ``str``, read in place, against a plain Python
walk: strings of every storage kind (ASCII, Latin-1, BMP, astral) and of mixed kinds, short
and long (past the block size); and the native gather of byte ranges against slices."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.tokenization.native._native import common_prefix, common_suffix, compared_lines, gather

ALPHABETS = ["ab", "aé", "a€", "a😀", "é€😀"]


def _prefix(a: str, b: str, i: int, j: int) -> int:
    k = 0
    while i + k < len(a) and j + k < len(b) and a[i + k] == b[j + k]:
        k += 1
    return k


def _suffix(a: str, b: str, floor: int) -> int:
    n = min(len(a), len(b)) - floor
    k = 0
    while k < n and a[len(a) - 1 - k] == b[len(b) - 1 - k]:
        k += 1
    return max(k, 0)


@st.composite
def related(draw: st.DrawFn) -> tuple[str, str]:
    """Two strings that share a long stretch: one, and a copy with a few edits, perhaps
    repeated many times (past 64K bytes) and perhaps in another alphabet's kind."""

    def text(max_size: int) -> str:
        alphabet = st.sampled_from(ALPHABETS[draw(st.integers(0, len(ALPHABETS) - 1))])
        return draw(st.text(alphabet, max_size=max_size))

    base = text(60) * draw(st.sampled_from([1, 3, 2000]))
    other = list(base)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(other)))
        other[at:at] = text(3)
    return base, "".join(other)


@given(related(), st.integers(0, 5), st.integers(0, 5))
def test_common_prefix_is_the_first_difference(pair: tuple[str, str], i: int, j: int) -> None:
    a, b = pair
    for x, y in ((a, b), (b, a)):
        assert common_prefix(x, y) == _prefix(x, y, 0, 0)
        assert common_prefix(x, y, i, j) == _prefix(x, y, i, j)


@given(related(), st.integers(0, 8))
def test_common_suffix_is_the_last_difference(pair: tuple[str, str], floor: int) -> None:
    a, b = pair
    for x, y in ((a, b), (b, a)):
        assert common_suffix(x, y, floor) == _suffix(x, y, floor)


def test_offsets_past_the_end_and_negative() -> None:
    assert common_prefix("abc", "abc", 3, 0) == 0
    assert common_prefix("abc", "abc", 9, 9) == 0
    assert common_suffix("abc", "abc", 9) == 0
    with pytest.raises(ValueError):
        common_prefix("abc", "abc", -1, 0)


@given(st.binary(max_size=300), st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300))))
def test_gather_is_the_ranges_slices_joined(source: bytes, ranges: list[tuple[int, int]]) -> None:
    inside = [(at, n) for at, n in ranges if at + n <= len(source)]
    starts = np.array([at for at, _ in inside], dtype=np.int64)
    lengths = np.array([n for _, n in inside], dtype=np.int64)
    assert gather(source, starts, lengths) == b"".join(source[at : at + n] for at, n in inside)


@pytest.mark.parametrize(
    ("starts", "lengths"),
    [([3], [1]), ([0], [4]), ([-1], [1]), ([0], [-1]), ([0, 1], [1]), ([2**62], [2**62])],
)
def test_gather_refuses_ranges_outside_the_source(starts: list[int], lengths: list[int]) -> None:
    with pytest.raises(ValueError, match="ranges outside"):
        gather(b"abc", np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64))


@given(st.lists(st.tuples(st.text("ab\n", max_size=4), st.text("ab\n", max_size=4)), min_size=1))
def test_compared_lines_pairs_the_lines_or_says_their_counts_differ(
    pairs: list[tuple[str, str]],
) -> None:
    a, b = (("\n".join(side)).encode() for side in zip(*pairs, strict=True))
    lines_a, lines_b = a.split(b"\n"), b.split(b"\n")
    found = compared_lines(a, b)
    if len(lines_a) != len(lines_b):
        assert found is None
        return
    assert found is not None
    changed, begin, length = found
    assert list(changed) == [int(x != y) for x, y in zip(lines_a, lines_b, strict=True)]
    at, size = np.frombuffer(begin, dtype=np.int64), np.frombuffer(length, dtype=np.int64)
    assert [b[s : s + n] for s, n in zip(at.tolist(), size.tolist(), strict=True)] == lines_b
