"""Rendered prompts handed over in pieces (``PiecedText``): the session relates a prompt to the
previous one by its pieces, and the ids stay the reference's whatever the pieces are."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.errors import InvalidTextError
from app.pieced_text import PiecedText, _equal_prefix
from app.tokenization import SessionTokenizer
from tests.adversarial import grown_texts

FAMILIES = ["qwen3", "llama3", "gpt2", "o200k", "smollm2"]


def _ids(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def _split(text: str, rng: random.Random) -> list[str]:
    """``text`` in random pieces, empty ones included."""
    cuts = sorted(rng.randint(0, len(text)) for _ in range(rng.randint(0, 6)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _copy(piece: str) -> str:
    """An equal piece that is (for two characters or more) another object."""
    return "".join(list(piece))


def _pieced(text: str, earlier: PiecedText | None, rng: random.Random) -> PiecedText:
    """``text`` in pieces the way a memoized render hands them over: some leading pieces of
    ``earlier`` that ``text`` really begins with (as they are, or equal copies), the rest split
    afresh; sometimes pieces of ``earlier`` that do not fit, to be refused by comparison."""
    pieces: list[str] = []
    if earlier is not None:
        at = 0
        for piece in earlier.pieces:
            if not text.startswith(piece, at) or rng.random() < 0.1:
                break
            pieces.append(piece if rng.random() < 0.8 else _copy(piece))
            at += len(piece)
        return PiecedText(pieces + _split(text[at:], rng))
    return PiecedText(_split(text, rng))


@pytest.fixture(scope="module")
def tokenizers(assets: dict[str, Path]) -> dict[str, SessionTokenizer]:
    return {name: SessionTokenizer.from_file(assets[name], window=64) for name in FAMILIES}


@pytest.mark.parametrize("name", FAMILIES)
def test_pieced_sessions_match_reference(
    name: str,
    tokenizers: dict[str, SessionTokenizer],
    reference: Callable[[str], Tokenizer],
) -> None:
    """Appends, edits anywhere, truncations and repeats, each version in pieces that share
    leading pieces with the previous version's, and now and then given as a plain ``str``."""
    tok, ref = tokenizers[name], reference(name)
    counter = iter(range(10**9))

    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(grown_texts(), st.randoms(use_true_random=False))
    def run(versions: list[str], rng: random.Random) -> None:
        session = f"t/p{next(counter)}"
        earlier: PiecedText | None = None
        for text in versions:
            if rng.random() < 0.15:
                enc = tok.encode(text, session=session)
                earlier = None
            else:
                pieced = _pieced(text, earlier, rng)
                assert pieced.text() == text
                enc = tok.encode(pieced, session=session)
                earlier = pieced
            assert list(enc.ids) == _ids(ref, text), (versions, text, enc.route)

    run()
    counts = tok.explain()["counters"]
    assert counts.get("route:append", 0) > 50 and counts.get("route:edit", 0) > 10


def test_pieces_that_moved_are_compared_not_trusted(
    tokenizers: dict[str, SessionTokenizer], reference: Callable[[str], Tokenizer]
) -> None:
    """The same objects at other positions, or an equal text split otherwise, share nothing
    by position: the prompt is still encoded exactly (and the unchanged start still reused)."""
    tok, ref = tokenizers["qwen3"], reference("qwen3")
    head = "System prompt with tools. " * 40
    a, b, c = "user: hello there\n", "assistant: hi!\n", "user: fix the bug in main.py\n"
    tok.encode(PiecedText([head, a, b]), session="t/moved")
    for pieces in ([head, b, a, c], [head + a[:3], a[3:], b, c], [head, a, b, c]):
        enc = tok.encode(PiecedText(pieces), session="t/moved")
        assert list(enc.ids) == _ids(ref, "".join(pieces)), pieces
        assert enc.reused_tokens > 0


def test_a_lone_surrogate_in_a_new_piece_is_refused_and_the_session_survives(
    tokenizers: dict[str, SessionTokenizer], reference: Callable[[str], Tokenizer]
) -> None:
    tok, ref = tokenizers["qwen3"], reference("qwen3")
    pieces = ["A stable transcript that keeps growing. " * 30]
    tok.encode(PiecedText(pieces), session="t/bad-piece")
    with pytest.raises(InvalidTextError, match="character 1201"):
        tok.encode(PiecedText([*pieces, "x\ud800"]), session="t/bad-piece")
    pieces.append("and grows again")
    enc = tok.encode(PiecedText(pieces), session="t/bad-piece")
    assert enc.route == "append" and list(enc.ids) == _ids(ref, "".join(pieces))


def test_tail_and_shared_start() -> None:
    text = PiecedText(["ab", "", "cde", "f"])
    assert [text.tail(n) for n in (0, 1, 2, 4, 6, 9)] == ["", "f", "ef", "cdef", "abcdef", "abcdef"]
    earlier = PiecedText(["ab", "", "cdx"])
    shared = text.shared_start(earlier)
    assert (shared.old_rest, shared.new_rest) == ("cdx", "cdef")
    assert PiecedText(["ab"]).shared_start(text).new_rest == ""
    assert text.shared_start(PiecedText([])).new_rest == "abcdef"


@given(
    st.lists(st.sampled_from(["a", "b", "ab", ""]), max_size=12),
    st.lists(st.sampled_from(["a", "b", "ab", ""]), max_size=12),
    st.integers(0, 12),
)
def test_equal_prefix_is_the_first_difference(a: list[str], b: list[str], shared: int) -> None:
    b = a[:shared] + b
    n = min(len(a), len(b))
    first = next((k for k in range(n) if a[k] != b[k]), n)
    assert _equal_prefix(tuple(a), tuple(b)) == first
