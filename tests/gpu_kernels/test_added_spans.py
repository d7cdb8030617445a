"""``AddedSpans`` (a pattern per first byte, merged) finds what one longest-first alternation
of all tokens finds: the reference's split (``test_added_split``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

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

token_lists = st.lists(
    st.text(alphabet=_ALPHABET, min_size=1, max_size=5).map(str.encode), min_size=1, max_size=6
)


@differential(1000)
@given(tokens=token_lists, data=st.data())
def test_as_one_alternation(tokens: list[bytes], data: st.DataObject) -> None:
    """Texts lacking some first bytes (those are not scanned) and holding others, tokens next
    to and inside each other."""
    parts = st.one_of(st.sampled_from(tokens), st.text(alphabet=_ALPHABET, max_size=3))
    text = b"".join(p if isinstance(p, bytes) else p.encode() for p in data.draw(st.lists(parts)))
    assert AddedSpans(tokens).find(text) == alternation_spans(tokens, text)


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
def test_edges(tokens: list[bytes], text: bytes) -> None:
    assert AddedSpans(tokens).find(text) == alternation_spans(tokens, text)


@pytest.mark.parametrize("name", FAMILIES)
def test_real_vocabularies(name: str, reference: Callable[[str], Tokenizer]) -> None:
    """Every added token of the vocabulary, spliced into a transcript, and run into each other."""
    added = json.loads(reference(name).to_str())["added_tokens"]
    tokens = [t["content"].encode() for t in added]
    pieces = corpus(5, 60_000).encode().split(b"\n")
    text = b"".join(p + tokens[i % len(tokens)] * (i % 3) for i, p in enumerate(pieces))
    assert AddedSpans(tokens).find(text) == alternation_spans(tokens, text)
