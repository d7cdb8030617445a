"""Stop strings cut from detokenized text: streamed in any pieces, the same text as cut whole,
and that equals the text before the first stop string (the definition)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from app.upstream.stops import StopTrim, trimmed

ALPHABET = "ab\n</>"
texts = st.text(alphabet=ALPHABET, max_size=40)
stops = st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=4), max_size=3)


def reference(text: str, stop_list: list[str]) -> str:
    cuts = [text.find(s) for s in stop_list if s in text]
    return text[: min(cuts)] if cuts else text


@given(texts, stops)
def test_whole_text_is_cut_before_the_first_stop(text: str, stop_list: list[str]) -> None:
    assert trimmed(text, stop_list) == reference(text, stop_list)


@given(texts, stops, st.lists(st.integers(0, 40), max_size=8))
def test_streamed_pieces_give_the_same_text(text: str, stop_list: list[str],
                                            splits: list[int]) -> None:
    bounds = sorted({0, len(text), *(min(s, len(text)) for s in splits)})
    trim = StopTrim(stop_list)
    sent = "".join(trim.feed(text[a:b]) for a, b in itertools.pairwise(bounds))
    assert sent + trim.end() == reference(text, stop_list)


def test_a_stop_split_across_pieces_is_held_back() -> None:
    trim = StopTrim(["</s>"])
    assert trim.feed("Hi <") == "Hi "
    assert trim.feed("/") == ""
    assert trim.feed("s> more") == ""
    assert trim.end() == ""
