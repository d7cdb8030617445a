"""Rendered prompts handed over in pieces (``PiecedText``): the session relates a prompt to the
previous one by its pieces, and the ids stay the reference's whatever the pieces are."""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.errors import InvalidTextError
from app.pieced_text import EncodedPieces, PiecedText, equal_prefix, write_utf8
from app.sessions import SessionTokenizer
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


@pytest.mark.parametrize("name", FAMILIES)
def test_pieced_sessions_match_reference(
    name: str,
    session_tokenizers: dict[str, SessionTokenizer],
    reference: Callable[[str], Tokenizer],
) -> None:
    """Appends, edits anywhere, truncations and repeats, each version in pieces that share
    leading pieces with the previous version's, and now and then given as a plain ``str``."""
    tok, ref = session_tokenizers[name], reference(name)
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


@pytest.mark.parametrize("name", ["qwen3", "llama3", "gpt2"])
def test_piece_level_edits_match_reference(
    name: str,
    session_tokenizers: dict[str, SessionTokenizer],
    reference: Callable[[str], Tokenizer],
) -> None:
    """Prompts edited piece by piece (a replaced first piece is Claude Code's billing line),
    behind a long stable head, so the repair reuses ids around each change."""
    tok, ref = session_tokenizers[name], reference(name)
    counter = iter(range(10**9))
    head = "You are a coding agent. Tools: read, edit, run.\n" * 20

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(piece_edits())
    def run(versions: list[list[str]]) -> None:
        session = f"t/e{next(counter)}"
        for pieces in versions:
            text = PiecedText([head, *pieces])
            enc = tok.encode(text, session=session)
            assert list(enc.ids) == _ids(ref, text.text()), (versions, pieces, enc.route)

    run()


def test_pieces_that_moved_are_compared_not_trusted(
    session_tokenizers: dict[str, SessionTokenizer], reference: Callable[[str], Tokenizer]
) -> None:
    """The same objects at other positions, or an equal text split otherwise, share nothing
    by position: the prompt is still encoded exactly (and the unchanged start still reused)."""
    tok, ref = session_tokenizers["qwen3"], reference("qwen3")
    head = "System prompt with tools. " * 40
    a, b, c = "user: hello there\n", "assistant: hi!\n", "user: fix the bug in main.py\n"
    tok.encode(PiecedText([head, a, b]), session="t/moved")
    for pieces in ([head, b, a, c], [head + a[:3], a[3:], b, c], [head, a, b, c]):
        enc = tok.encode(PiecedText(pieces), session="t/moved")
        assert list(enc.ids) == _ids(ref, "".join(pieces)), pieces
        assert enc.reused_tokens > 0


def test_a_lone_surrogate_in_a_new_piece_is_refused_and_the_session_survives(
    session_tokenizers: dict[str, SessionTokenizer], reference: Callable[[str], Tokenizer]
) -> None:
    tok, ref = session_tokenizers["qwen3"], reference("qwen3")
    pieces = ["A stable transcript that keeps growing. " * 30]
    tok.encode(PiecedText(pieces), session="t/bad-piece")
    with pytest.raises(InvalidTextError, match="character 1201"):
        tok.encode(PiecedText([*pieces, "x\ud800"]), session="t/bad-piece")
    pieces.append("and grows again")
    enc = tok.encode(PiecedText(pieces), session="t/bad-piece")
    assert enc.route == "append" and list(enc.ids) == _ids(ref, "".join(pieces))


@st.composite
def piece_edits(draw: st.DrawFn) -> list[list[str]]:
    """Successive piece lists, each made from the one before by piece-level edits: pieces
    replaced (the billing line), copied equal, appended, dropped, inserted (shifting the rest)."""
    piece = st.text(st.sampled_from("ab \n<|>é語😀"), max_size=6)
    pieces = draw(st.lists(piece, max_size=8))
    versions = [pieces]
    for _ in range(draw(st.integers(1, 5))):
        pieces = list(pieces)
        for _ in range(draw(st.integers(0, 3))):
            action = draw(st.sampled_from(["replace", "copy", "append", "drop", "insert"]))
            at = draw(st.integers(0, len(pieces)))
            if action == "append" or not pieces:
                pieces += draw(st.lists(piece, min_size=1, max_size=3))
            elif action == "replace":
                pieces[min(at, len(pieces) - 1)] = draw(piece)
            elif action == "copy":
                pieces[min(at, len(pieces) - 1)] = _copy(pieces[min(at, len(pieces) - 1)])
            elif action == "drop":
                del pieces[at:]
            else:
                pieces.insert(at, draw(piece))
        versions.append(pieces)
    return versions


@given(piece_edits())
def test_successor_builds_the_utf8_of_the_new_text(versions: list[list[str]]) -> None:
    utf8, encoded = EncodedPieces.measured(PiecedText(versions[0]))
    assert utf8 == "".join(versions[0]).encode()
    for pieces in versions[1:]:
        new = PiecedText(pieces)
        found = encoded.successor(new, utf8)
        assert found is not None
        data, shared, encoded = found
        assert data == new.text().encode()
        assert data[:shared] == utf8[:shared]
        assert encoded.ends.tolist() == EncodedPieces.measured(new)[1].ends.tolist()
        assert encoded.nbytes == sum(map(sys.getsizeof, pieces))
        utf8 = data


def test_successor_refuses_texts_that_do_not_line_up() -> None:
    """A piece inserted at the start shifts every piece: no position lines up."""
    old = [f"message {i}\n" for i in range(300)]
    utf8, encoded = EncodedPieces.measured(PiecedText(old))
    assert encoded.successor(PiecedText(["system\n", *old]), utf8) is None
    found = encoded.successor(PiecedText(["billing line\n", *old[1:], "new\n"]), utf8)
    assert found is not None and found[1] == 0


@given(st.lists(st.lists(st.text(max_size=40), max_size=8), min_size=1, max_size=6))
def test_write_utf8_refills_one_buffer_with_each_text(texts: list[list[str]]) -> None:
    """One buffer, texts longer and shorter than the one before, pieced or one ``str`` (a
    long one is encoded in slices)."""
    out = bytearray(b"stale bytes of an earlier text")
    for pieces in texts:
        whole = "".join(pieces)
        for text in (PiecedText(pieces), whole, whole * 3000):
            write_utf8(text, out)
            assert out == _utf8_of(text)


def _utf8_of(text: str | PiecedText) -> bytes:
    return (text if isinstance(text, str) else text.text()).encode("utf-8")


def test_write_utf8_refuses_a_lone_surrogate() -> None:
    with pytest.raises(UnicodeEncodeError):
        write_utf8(PiecedText(["ok", "\ud800"]), bytearray())


def test_tail() -> None:
    text = PiecedText(["ab", "", "cde", "f"])
    assert [text.tail(n) for n in (0, 1, 2, 4, 6, 9)] == ["", "f", "ef", "cdef", "abcdef", "abcdef"]


@given(
    st.lists(st.sampled_from(["a", "b", "ab", ""]), max_size=12),
    st.lists(st.sampled_from(["a", "b", "ab", ""]), max_size=12),
    st.integers(0, 12),
)
def test_equal_prefix_is_the_first_difference(a: list[str], b: list[str], shared: int) -> None:
    b = a[:shared] + b
    n = min(len(a), len(b))
    first = next((k for k in range(n) if a[k] != b[k]), n)
    assert equal_prefix(a, b) == equal_prefix(tuple(a), tuple(b)) == first
