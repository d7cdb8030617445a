"""Stop strings cut from detokenized text: streamed in any pieces, the same text as cut whole,
and that equals the text before the first stop string (the definition).  The automaton
(``StopStrings``) is checked piece by piece against the plain search it replaced, which
looked for every stop string in the held tail plus the new piece."""

from __future__ import annotations

import itertools

from hypothesis import example, given
from hypothesis import strategies as st

from app.upstream.stops import StopStrings, StopTrim, trimmed

ALPHABET = "ab\n</>"
texts = st.text(alphabet=ALPHABET, max_size=40)
stops = st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=4), max_size=3)
many_stops = st.lists(st.text(alphabet="abc", min_size=0, max_size=6), max_size=12)


def reference(text: str, stop_list: list[str]) -> str:
    cuts = [text.find(s) for s in stop_list if s in text]
    return text[: min(cuts)] if cuts else text


class PlainStopTrim:
    """The search the automaton replaced: every stop string looked for in the held tail plus
    the new piece (time in the number of stops times the text)."""

    def __init__(self, stops: list[str]) -> None:
        self._stops = [s for s in stops if s]
        self._held = ""
        self._stopped = False

    def feed(self, text: str) -> str:
        if self._stopped or not self._stops:
            return "" if self._stopped else text
        held = self._held + text
        cut = min((i for s in self._stops if (i := held.find(s)) >= 0), default=-1)
        keep = max(_overlap(held, s) for s in self._stops)
        if cut >= 0 and cut <= len(held) - keep:  # no stop begun before the cut may still end
            self._stopped, self._held = True, ""
            return held[:cut]
        self._held = held[len(held) - keep :]
        return held[: len(held) - keep]

    def end(self) -> str:
        held, self._held = self._held, ""
        return reference(held, self._stops)


def _overlap(text: str, stop: str) -> int:
    for n in range(min(len(text), len(stop) - 1), 0, -1):
        if stop.startswith(text[len(text) - n :]):
            return n
    return 0


def pieces(text: str, splits: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(min(s, len(text)) for s in splits)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@given(texts, stops)
def test_whole_text_is_cut_before_the_first_stop(text: str, stop_list: list[str]) -> None:
    assert trimmed(text, stop_list) == reference(text, stop_list)


@given(texts, stops, st.lists(st.integers(0, 40), max_size=8))
@example("><<", ["<", "><<"], [2])  # "<" ends first, but "><<" begins before it
def test_streamed_pieces_give_the_same_text(
    text: str, stop_list: list[str], splits: list[int]
) -> None:
    trim = StopTrim(stop_list)
    sent = "".join(trim.feed(piece) for piece in pieces(text, splits))
    assert sent + trim.end() == reference(text, stop_list)


@given(st.text(alphabet="abc", max_size=60), many_stops, st.lists(st.integers(0, 60), max_size=10))
def test_each_piece_is_what_the_plain_search_sent(
    text: str, stop_list: list[str], splits: list[int]
) -> None:
    """Overlapping stop strings (one inside another, one a prefix of another, shared ends)
    over a three-letter alphabet: every ``feed`` returns what the plain search returned."""
    automaton, plain = StopTrim(StopStrings(stop_list)), PlainStopTrim(stop_list)
    for piece in pieces(text, splits):
        assert automaton.feed(piece) == plain.feed(piece)
    assert automaton.end() == plain.end()


def test_a_stop_split_across_pieces_is_held_back() -> None:
    trim = StopTrim(["</s>"])
    assert trim.feed("Hi <") == "Hi "
    assert trim.feed("/") == ""
    assert trim.feed("s> more") == ""
    assert trim.end() == ""


def test_the_earliest_start_wins_over_the_earliest_end() -> None:
    """The stop "bc" ends first, but "abcd" begins first: the text is cut before "abcd"."""
    assert trimmed("xabcdy", ["bc", "abcd"]) == "x"
    assert trimmed("xabcy", ["bc", "abcd"]) == "xa"


def test_ten_thousand_stop_strings_sharing_prefixes() -> None:
    """Many stop strings that share their beginnings with each other and with the text (the
    time per character, independent of their number, is measured by
    ``loadtest/event_loop_gaps.py``)."""
    stop_list = [f"stop-{k:05d}!" for k in range(10_000)]
    stops_ = StopStrings(stop_list)
    text = "stop-0" * 20_000 + "stop-09999!" + "tail"
    assert trimmed(text, stops_) == "stop-0" * 20_000
    assert stops_.max_length == len(stop_list[0])
