"""PieceEncoder: every call of an edited session equals Hugging Face's own procedure (split at
special tokens, encode each piece), whatever was reused from the previous call."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.sessions import piece_repair
from app.sessions.ids_json import IdsJsonCache
from app.sessions.pieces import PieceState
from app.sessions.registry import SessionRegistry
from app.sessions.typed_specials import Masked, TypedSpecials
from app.tokenization.engines import EngineRun
from app.tokenization.state import SessionState
from app.tokenization.transcript import Outcome, TranscriptEncoder

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
    previous, previous_list = None, []
    id_json = IdsJsonCache(SessionRegistry(1 << 24).slot("ids_json"))
    for change in [None, *changes]:
        if change is not None:
            text = _apply(text, *change[:4])
            if not change[4] and change is not changes[-1]:
                continue
        ids, reused, copied, _ = typed.encode(text, masked, session=key)
        if previous is not None:  # grown in its buffer, the previous call's ids stay as they were
            assert previous.tolist() == previous_list
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
        previous, previous_list = ids, ids.tolist()


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


def test_an_appended_call_grows_the_ids_in_the_previous_buffer(
    qwen: Tokenizer, plain: Tokenizer, typed: TypedSpecials
) -> None:
    """A call that keeps the previous call's ids from the start writes only the new ones after
    them, in the same buffer (a copy of all ids per call at 1M characters is a megabyte of
    fresh memory), and leaves the previous call's ids as they were."""
    masked = Masked([], None, {SENTINEL: "<|im_end|>"})
    text = "<|im_start|>user\nsay " + SENTINEL + " twice<|im_end|>\n"
    calls = []
    for k in range(6):
        text += f"<|im_start|>assistant\nline {k} " + SENTINEL + "<|im_end|>\n"
        ids = typed.encode(text, masked, session="t/grows").ids
        assert list(ids) == _expected(qwen, plain, text)
        calls.append((ids, ids.tolist()))
    for (before, kept), (after, _) in itertools.pairwise(calls):
        assert np.shares_memory(before, after) and before.tolist() == kept


def test_a_piece_text_is_encoded_once_per_call(
    qwen: Tokenizer, plain: Tokenizer, typed: TypedSpecials
) -> None:
    """Pieces that recur in one call (the newline between every two turns) are encoded once:
    a first call, and a call whose appended turns repeat a piece that the previous call's
    copied prefix held but did not encode."""
    masked = Masked([], None, {SENTINEL: "<|im_end|>"})
    turns = [f"<|im_start|>{role}\nsay {SENTINEL} {k % 3}<|im_end|>\n" for k, role in
             enumerate(["user", "assistant"] * 20)]  # fmt: skip
    for text in ("".join(turns), "".join(turns * 2)):
        with _repairs(typed) as repairs:
            ids, _, _, _ = typed.encode(text, masked, session="t/once")
        assert list(ids) == _expected(qwen, plain, text)
        encoded = [call.args[0] for call in repairs.call_args_list]
        assert len(encoded) == len(set(encoded)), sorted(encoded)


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


LONG = [  # pieces past ``REPAIRED_PIECE``: repaired, not encoded whole, when they change
    "You are a careful agent. cch=1; " + "Read the file, then " + SENTINEL + " act. " * 400,
    "def f(x):\n    return x  # <think> " * 90 + SENTINEL,
    "数字 123 4567 ünïcode\t\t" * 150,
]
bodies = st.one_of(st.sampled_from(LONG), texts)
MEANINGS = ["<|im_end|>", "<|endoftext|>", "<|im_start|>"]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("edit"), st.integers(0, 9), st.floats(0, 1), texts, st.integers(0, 9)),
        st.tuples(st.just("append"), bodies),
        st.tuples(st.just("insert"), st.integers(0, 9), bodies),
        st.tuples(st.just("delete"), st.integers(0, 9)),
        st.tuples(st.just("meaning"), st.sampled_from(MEANINGS)),
    ),
    min_size=1,
    max_size=8,
)


def _step(bodies: list[str], meaning: str, step: tuple[Any, ...]) -> str:
    """Applies one step to the message bodies in place; returns the sentinel's meaning."""
    op, *args = step
    if op == "edit" and bodies:  # a change inside a (long) piece, such as a billing line
        k, at, fragment, cut = args
        body = bodies[k % len(bodies)]
        i = int(at * len(body))
        bodies[k % len(bodies)] = body[:i] + fragment + body[i + cut :]
    elif op == "append":
        bodies.append(args[0])
    elif op == "insert":  # pieces added before others: every later one moves
        bodies.insert(args[0] % (len(bodies) + 1), args[1])
    elif op == "delete" and bodies:
        del bodies[args[0] % len(bodies)]
    elif op == "meaning":
        return str(args[0])
    return meaning


def _chatml(bodies: list[str]) -> str:
    turns = (f"<|im_start|>user\n{body}<|im_end|>\n" for body in bodies)
    return "".join(turns) + "<|im_start|>assistant\n"


def _piece(body: str) -> bytes:
    """The UTF-8 of the piece a message body renders to, the typed text restored."""
    return f"user\n{body}".replace(SENTINEL, "<|im_end|>").encode()


def _check_engines(ids: Any, reused: int, engines: tuple[EngineRun, ...]) -> None:
    """The runs cover every id, in order, and the "reused" ones are the ids counted reused."""
    assert [(run.first, run.last) for run in engines] == list(
        zip([0, *(run.last for run in engines[:-1])], [run.last for run in engines], strict=True)
    )
    assert engines[-1].last == len(ids) if engines else not len(ids)
    assert all(run.first < run.last for run in engines)
    assert reused == sum(run.last - run.first for run in engines if run.engine == "reused")


@pytest.fixture(scope="module")
def fresh(qwen: Tokenizer) -> TypedSpecials:
    return TypedSpecials(qwen, sessions=SessionRegistry(1 << 26))


@pytest.mark.parametrize("repaired_from", [16, 2048], ids=["short-too", "long"])
@settings(max_examples=30, deadline=None)
@given(st.lists(bodies, min_size=1, max_size=4), steps, st.integers(0, 10**9))
def test_sessions_with_long_pieces_match_the_reference_and_a_fresh_process(
    qwen: Tokenizer,
    plain: Tokenizer,
    typed: TypedSpecials,
    fresh: TypedSpecials,
    repaired_from: int,
    start: list[str],
    changes: list[tuple[Any, ...]],
    session: int,
) -> None:
    """Edits inside long pieces, appends, pieces added and removed, the typed text's meaning
    changed: every call's ids are the reference's per-piece procedure's, and a session never
    seen (a fresh process's) gets the same ids."""
    key, meaning = f"t/long-{session}", MEANINGS[0]
    with mock.patch.object(piece_repair, "REPAIRED_PIECE", repaired_from):
        for step in [None, *changes]:
            if step is not None:
                meaning = _step(start, meaning, step)
            text = _chatml(start)
            masked = Masked([], None, {SENTINEL: meaning})
            ids, reused, _, engines = typed.encode(text, masked, session=key)
            assert list(ids) == _expected(qwen, plain, text, meaning)
            _check_engines(ids, reused, engines)
            first = fresh.encode(text, masked, session=f"t/fresh-{session}")
            fresh.forget(f"t/fresh-{session}")
            assert list(first.ids) == list(ids)
            assert first.reused == 0  # (nothing of it was known)


def _repairs(typed: TypedSpecials) -> Any:
    """A spy on the piece encoder's calls of the repairer, ``(text, base)``."""
    return mock.patch.object(typed._pieces, "_encode_piece", side_effect=typed._repairer.encode)


def test_piece_states_live_in_the_session_context_alone(
    qwen: Tokenizer, plain: Tokenizer, fresh: TypedSpecials
) -> None:
    """A billing edit of the long system prompt is repaired from its previous version, whose
    state is a value inside the session's one context (no key, no store of its own): evicting
    that context, or forgetting the session, leaves nothing to repair from."""
    registry = SessionRegistry(1 << 26)
    typed = TypedSpecials(qwen, sessions=registry)
    masked = Masked([], None, {SENTINEL: "<|im_end|>"})
    bodies = [LONG[0], "hi " + SENTINEL, LONG[1]]
    typed.encode(_chatml(bodies), masked, session="t/a")
    for k in range(2, 5):
        previous = list(bodies)
        bodies[0] = bodies[0].replace(f"cch={k - 1};", f"cch={k};")
        bodies.insert(1, f"turn {k}")  # every later piece moves one index up
        bodies[-1] += f" edited {k}"
        text = _chatml(bodies)
        with _repairs(typed) as repairs:
            ids, reused, _, engines = typed.encode(text, masked, session="t/a")
        assert list(ids) == _expected(qwen, plain, text)
        _check_engines(ids, reused, engines)
        # each changed long piece was repaired from its own previous version, the last one
        # although its index moved
        bases = {call.args[0].encode(): call.args[1] for call in repairs.call_args_list}
        assert bases[_piece(bodies[0])].text == _piece(previous[0])
        assert bases[_piece(bodies[-1])].text == _piece(previous[-1])
        assert reused > 0.9 * len(ids)
        assert registry.stats()["sessions"] == 1 == registry.holding("pieces")
        state = registry.value("t/a", "pieces")
        assert isinstance(state, PieceState) and len(state.states) == 2
        held = sum(s.nbytes for s in state.states.values())
        assert registry.stats()["bytes"] >= state.nbytes > held
    for drop in (registry.forget, typed.forget):
        drop("t/a")
        bodies[0] += " more"
        with _repairs(typed) as repairs:
            ids, reused, _, engines = typed.encode(_chatml(bodies), masked, session="t/a")
        assert all(call.args[1] is None for call in repairs.call_args_list)
        assert reused == 0 and "reused" not in {run.engine for run in engines}
        # (the session's context holds the new call's state again)
        assert registry.stats()["sessions"] == 1


def test_disabled_repair_encodes_changed_pieces_whole(qwen: Tokenizer, plain: Tokenizer) -> None:
    typed = TypedSpecials(qwen, sessions=SessionRegistry(1 << 26))
    masked = Masked([], None, {SENTINEL: "<|im_end|>"})
    bodies = [LONG[0], "hi " + SENTINEL]
    typed.encode(_chatml(bodies), masked, session="t/d")
    typed.disable_repair("shadow verifier divergence")
    bodies[0] = bodies[0].replace("cch=1;", "cch=2;")
    text = _chatml(bodies)
    outcomes: list[tuple[SessionState | None, Outcome]] = []
    real = TranscriptEncoder.outcome

    def outcome(self: TranscriptEncoder, *args: Any) -> Outcome:
        outcomes.append((args[2], real(self, *args)))
        return outcomes[-1][1]

    with mock.patch.object(TranscriptEncoder, "outcome", autospec=True, side_effect=outcome):
        ids, _, _, _ = typed.encode(text, masked, session="t/d")
    assert list(ids) == _expected(qwen, plain, text)
    [(base, found)] = outcomes
    assert base is not None and base.text == _piece(LONG[0])  # there was a base, unused:
    assert (found.route, found.fallback) == ("full", "shadow verifier divergence")
