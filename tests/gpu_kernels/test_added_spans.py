"""``AddedSpans`` (a pattern per first byte, merged) finds what one longest-first alternation
of all tokens finds: the reference's split (``test_added_split``).  Each test runs both ways
of finding a first byte's tokens: tried at each hit of it (``bytes_per_hit=1``: never too
dense), scanned for by the regex engine (no hit is sparse enough), and the switch between them
once a text's hits run past the budget."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from gpu_kernels.added_spans import AddedSpans
from loadtest.agent_sessions.session import corpus
from tests.gpu_kernels.conftest import FAMILIES, differential


def alternation_spans(tokens: list[bytes], data: bytes) -> list[tuple[int, int]]:
    """Leftmost-longest by one regex of all tokens, longest first (``AddedSplit``'s before)."""
    pattern = re.compile(b"|".join(map(re.escape, sorted(tokens, key=len, reverse=True))))
    return [m.span() for m in pattern.finditer(data)]


_ALPHABET = "xab<｜"
"""Four first bytes (``｜`` is three bytes), and tokens that repeat bytes, so starts overlap."""

WAYS = pytest.mark.parametrize(
    "bytes_per_hit", [1, 8, 1 << 40], ids=["at hits", "switching", "scanned"]
)

token_lists = st.lists(
    st.text(alphabet=_ALPHABET, min_size=1, max_size=5).map(str.encode), min_size=1, max_size=6
)


@WAYS
@differential(1000)
@given(tokens=token_lists, data=st.data())
def test_as_one_alternation(tokens: list[bytes], data: st.DataObject, bytes_per_hit: int) -> None:
    """Texts lacking some first bytes and holding others, tokens next to and inside each
    other."""
    parts = st.one_of(st.sampled_from(tokens), st.text(alphabet=_ALPHABET, max_size=3))
    text = b"".join(p if isinstance(p, bytes) else p.encode() for p in data.draw(st.lists(parts)))
    found = AddedSpans(tokens, bytes_per_hit=bytes_per_hit).find(text)
    assert found == alternation_spans(tokens, text)


@WAYS
@pytest.mark.parametrize(
    ("tokens", "text"),
    [
        ([b"<a", b"\xef\xbd\x9cb"], b""),  # no first byte in the text
        ([b"<a", b"\xef\xbd\x9cb"], b"x<a<a"),  # one of two
        ([b"<a", b"\xef\xbd\x9cb"], b"\xef\xbd\x9cb<a"),
        # a shared start that overlaps itself ("aa" at +1) is not consumed whole: "xa" covers
        # the "aa" at 1, and "aab" at 2 must still be found
        ([b"xa", b"aa", b"aab"], b"xaaab"),
        ([b"a", b"aa", b"aaa"], b"aaaaa"),  # one-byte tokens, each a prefix of the next
        ([b"ab", b"b"], b"aab"),
    ],
)
def test_edges(tokens: list[bytes], text: bytes, bytes_per_hit: int) -> None:
    found = AddedSpans(tokens, bytes_per_hit=bytes_per_hit).find(text)
    assert found == alternation_spans(tokens, text)


@pytest.mark.parametrize("bytes_per_hit", [1, 1024, 1 << 40])
@pytest.mark.parametrize("name", FAMILIES)
def test_real_vocabularies(
    name: str, bytes_per_hit: int, reference: Callable[[str], Tokenizer]
) -> None:
    """Every added token of the vocabulary, spliced into a transcript, and run into each other."""
    added = json.loads(reference(name).to_str())["added_tokens"]
    tokens = [t["content"].encode() for t in added]
    pieces = corpus(5, 60_000).encode().split(b"\n")
    text = b"".join(p + tokens[i % len(tokens)] * (i % 3) for i, p in enumerate(pieces))
    found = AddedSpans(tokens, bytes_per_hit=bytes_per_hit).find(text)
    assert found == alternation_spans(tokens, text)


class _Counted:
    """A lead's pattern, counting the regex engine's scans of a text."""

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern = pattern
        self.scans = 0

    def match(self, data: bytes, at: int) -> re.Match[bytes] | None:
        return self.pattern.match(data, at)

    def finditer(self, data: bytes) -> Iterator[re.Match[bytes]]:
        self.scans += 1
        return self.pattern.finditer(data)


@pytest.mark.parametrize(("gap", "scans"), [(2000, 0), (1100, 0), (900, 1), (10, 1)])
def test_a_lead_is_scanned_for_only_where_dense(gap: int, scans: int) -> None:
    """Past one hit per KiB the engine's scan is the cheaper (the answer is the same)."""
    tokens = [b"<a", b"<|x|>"]
    text = (b"<|x|>" + b"-" * gap) * 50
    spans = AddedSpans(tokens)
    counted = spans._patterns[b"<"] = _Counted(spans._patterns[b"<"])  # type: ignore[assignment]
    assert spans.find(text) == alternation_spans(tokens, text)
    assert counted.scans == scans
