"""PieceEncoder: every call of an edited session equals Hugging Face's own procedure (split at
special tokens, encode each piece), whatever was reused from the previous call."""

from __future__ import annotations

import re
from pathlib import Path
from unittest import mock

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.sessions import piece_repair
from app.sessions.ids_json import IdsJsonCache
from app.sessions.registry import SessionRegistry
from app.sessions.typed_specials import Masked, TypedSpecials

SENTINEL = "\U0010fd00"
fragments = st.one_of(
    st.sampled_from(
        [
            "<|im_start|>",
            "<|im_end|>",
            "<|endoftext|>",
            "<|",
            "|>",
            "<think>",
            SENTINEL,
            "\n",
            " ",
            "user\n",
            "x<|im_",
            "end|>",
        ]
    ),
    st.text(st.characters(max_codepoint=0x10FCFF, exclude_categories=("Cs",)), max_size=10),
)
texts = st.lists(fragments, max_size=12).map("".join)
edits = st.lists(
    st.tuples(
        st.sampled_from(["append", "insert", "delete", "replace"]),
        st.floats(0, 1),
        st.floats(0, 1),
        texts,
        st.booleans(),  # encode after this edit (else it lands with the next: edit + append)
    ),
    min_size=1,
    max_size=8,
)


@pytest.fixture(scope="module")
def qwen(assets: dict[str, Path]) -> Tokenizer:
    return Tokenizer.from_file(str(assets["qwen3"]))


@pytest.fixture(scope="module")
def typed(qwen: Tokenizer) -> TypedSpecials:
    return TypedSpecials(qwen, sessions=SessionRegistry(1 << 22))


@pytest.fixture(scope="module")
def plain(qwen: Tokenizer) -> Tokenizer:
    tok = Tokenizer.from_str(qwen.to_str())
    tok.encode_special_tokens = True
    return tok


def _expected(qwen: Tokenizer, plain: Tokenizer, text: str, typed: str = "<|im_end|>") -> list[int]:
    """HF's encode, with the sentinel standing for special-token text typed by a user."""
    if SENTINEL not in text:
        return list(qwen.encode(text, add_special_tokens=False).ids)
    specials = [t.content for t in qwen.get_added_tokens_decoder().values() if t.special]
    pattern = "|".join(map(re.escape, sorted(specials, key=len, reverse=True)))
    ids: list[int] = []
    for piece in re.split(f"({pattern})", text):
        if piece in specials:
            ids.append(qwen.token_to_id(piece))
        elif piece:
            ids += plain.encode(piece.replace(SENTINEL, typed)).ids
    return ids


def _apply(text: str, op: str, a: float, b: float, fragment: str) -> str:
    i, j = sorted((int(a * len(text)), int(b * len(text))))
    if op == "append":
        return text + fragment
    if op == "insert":
        return text[:i] + fragment + text[i:]
    if op == "delete":
        return text[:i] + text[j:]
    return text[:i] + fragment + text[j:]


@pytest.mark.parametrize("repaired_from", [0, 2048], ids=["pieces-repaired", "pieces-encoded"])
@settings(max_examples=250, deadline=None)
@given(texts, edits, st.integers(0, 10**9))
def test_edited_sessions_match_the_reference(
    qwen: Tokenizer,
    plain: Tokenizer,
    typed: TypedSpecials,
    repaired_from: int,
    start: str,
    changes: list[tuple[str, float, float, str, bool]],
    session: int,
) -> None:
    """(``repaired_from``: the piece length from which a changed piece is repaired from the
    session's previous piece rather than encoded whole.)"""
    with mock.patch.object(piece_repair, "REPAIRED_PIECE", repaired_from):
        check_edits(qwen, plain, typed, start, changes, session)


def check_edits(
    qwen: Tokenizer,
    plain: Tokenizer,
    typed: TypedSpecials,
    start: str,
    changes: list[tuple[str, float, float, str, bool]],
    session: int,
) -> None:
    """Each call's ids equal the reference; the stretches it says it copied from the previous
    call's ids are those ids, and the id JSON spliced from them is the ids' JSON."""
    masked = Masked([], None, {SENTINEL: "<|im_end|>"})
    text = start
    key = f"t/{session}"
    previous = None
    id_json = IdsJsonCache(SessionRegistry(1 << 24).slot("ids_json"))
    for change in [None, *changes]:
        if change is not None:
            text = _apply(text, *change[:4])
            if not change[4] and change is not changes[-1]:
                continue
        ids, reused, copied, _ = typed.encode(text, masked, session=key)
        restored = masked.restore(text)
        assert restored == text.replace(SENTINEL, "<|im_end|>")
        assert list(ids) == _expected(qwen, plain, text)
        assert 0 <= reused <= len(ids)
        if copied is not None and previous is not None:  # (the first call's previous call
            # may be an earlier example's, of the same session number)
            assert copied.source is previous
            for first, last, at in copied.runs:
                assert 0 <= first < last <= len(previous)
                assert list(ids[at : at + last - first]) == list(previous[first:last])
        json = id_json.json_for(key, ids, copied)
        assert bytes(json.text) == orjson.dumps(ids.tolist())[1:-1]
        previous = ids


def test_a_long_session_reuses_almost_everything(
    qwen: Tokenizer, plain: Tokenizer, typed: TypedSpecials
) -> None:
    masked = Masked([], None, {SENTINEL: "<|im_end|>"})
    turn = "<|im_start|>tool\nprint('" + SENTINEL + "') # x" * 40 + "<|im_end|>\n"
    text = "<|im_start|>system\ncch=1;<|im_end|>\n"
    for k in range(30):
        text = text.replace(f"cch={k};", f"cch={k + 1};") + turn.replace("x", str(k))
        ids, reused, _, _ = typed.encode(text, masked, session="t/long")
        assert list(ids) == _expected(qwen, plain, text)
    assert reused > 0.9 * len(ids)


def test_an_edit_near_the_start_resyncs_the_scan(
    qwen: Tokenizer, plain: Tokenizer, typed: TypedSpecials
) -> None:
    """A billing line edited and a turn appended in every call: after the edit, the scan
    meets the previous call's at the next special token and copies the rest, so each call
    visits a few pieces, not every turn."""
    masked = Masked([], None, {SENTINEL: "<|im_end|>"})
    text = "<|im_start|>system\ncch=10;" + "s" * 100 + "<|im_end|>\n"
    pieces = []
    real = typed._pieces._piece  # type: ignore[union-attr]
    for k in range(10, 40):
        turn = f"<|im_start|>tool\nprint('{SENTINEL}') # {k} " * 3 + "<|im_end|>\n"
        text = text.replace(f"cch={k};", f"cch={k + 1};") + turn
        with mock.patch.object(typed._pieces, "_piece", side_effect=real) as visited:
            ids, _, copied, _ = typed.encode(text, masked, session="t/billing")
        assert list(ids) == _expected(qwen, plain, text)
        pieces.append(visited.call_count)
    assert max(pieces[1:]) <= 10, pieces  # a full scan visits 4 more every call
    # All but the edited piece and the last turns are the previous call's ids (so the id
    # JSON is spliced from the previous call's, not written anew).
    assert copied is not None
    assert sum(last - first for first, last, _ in copied.runs) > 0.9 * len(ids)


def test_changed_sentinel_meaning_discards_the_state(
    qwen: Tokenizer, plain: Tokenizer, typed: TypedSpecials
) -> None:
    text = "a " + SENTINEL + " b<|im_end|>"
    for typed_text in ("<|im_end|>", "<|endoftext|>"):
        masked = Masked([], None, {SENTINEL: typed_text})
        ids, _, _, _ = typed.encode(text, masked, session="t/m")
        restored = masked.restore(text)
        assert restored == text.replace(SENTINEL, typed_text)
        assert list(ids) == _expected(qwen, plain, text, typed_text)
