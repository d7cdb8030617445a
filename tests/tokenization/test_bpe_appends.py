"""Session appends through the incremental BPE (SentencePiece BPE files, no pre-split) give the
reference's ids and token ends at every call, whatever is appended: special tokens, pieces of
them split across calls, user-defined pieces, spaces, emoji, real text."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.sessions import SessionTokenizer
from app.sessions.tokenizer import store_key
from app.tokenization.reference import ReferenceEncoder
from tests.adversarial import texts

FAMILIES = ("mistral_v1", "mistral_v3")
REPO_ROOT = Path(__file__).resolve().parents[2]
FRAGMENTS = [
    "[INST]", " [/INST]", "</s>", "<s>", "[INS", "T]", "[/", "INST]", "[REFERENCE_DOC_1]",
    " hello", " world", "\n", "  ", " ", "a", "x y", "日本", "😀", "<0x41>", "▁",
]  # fmt: skip
appends = st.lists(
    st.lists(st.sampled_from(FRAGMENTS) | texts, max_size=5).map("".join), min_size=1, max_size=8
)


@pytest.fixture(scope="session")
def tokenizers(assets: dict[str, Path]) -> Callable[[str], SessionTokenizer]:
    return functools.cache(lambda name: SessionTokenizer.from_file(assets[name]))


@pytest.fixture(scope="session")
def references(assets: dict[str, Path]) -> Callable[[str], ReferenceEncoder]:
    return functools.cache(lambda name: ReferenceEncoder.from_file(assets[name]))


def grow(tok: SessionTokenizer, reference: ReferenceEncoder, session: str, parts: list[str]):
    """Send the growing text call by call; check ids and stored ends; return the routes."""
    routes = []
    text = ""
    for part in parts:
        text += part
        enc = tok.encode(text, session=session)
        ids, ends = reference.encode(text)
        np.testing.assert_array_equal(enc.ids, ids)
        stored = tok.store.get(store_key(session))
        assert stored is not None
        np.testing.assert_array_equal(stored.ends, ends)
        routes.append(enc.route)
    return routes


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(FAMILIES), parts=appends, session=st.integers(0, 10**9))
def test_random_appends(name: str, parts: list[str], session: int, tokenizers, references):
    grow(tokenizers(name), references(name), f"t/{session}", parts)


@pytest.mark.parametrize("name", FAMILIES)
def test_chat_shaped_appends_take_the_append_path(name: str, tokenizers, references):
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8").replace("▁", "_")
    parts = ["<s>[INST] " + readme[:500] + " [/INST]"]
    for offset in range(500, 20_000, 1500):
        parts += [
            readme[offset : offset + 700],
            "</s>[INST] " + readme[offset + 700 : offset + 1500],
        ]
    routes = grow(tokenizers(name), references(name), f"t/chat-{name}", parts)
    assert routes[0] == "full" and set(routes[1:]) == {"append"}


@pytest.mark.parametrize("name", FAMILIES)
def test_special_tokens_split_across_calls(name: str, tokenizers, references):
    parts = ["a [INS", "T] b", " [/", "INST] c</", "s>", " d<", "s", ">"]
    routes = grow(tokenizers(name), references(name), f"t/split-{name}", parts)
    assert "append" in routes


def test_literal_metaspace_takes_the_full_path(tokenizers, references):
    """A literal ▁ in the last segment: full encodes until a special token closes it."""
    parts = ["a b", " ▁c", " d", "</s> e", " f"]
    routes = grow(tokenizers("mistral_v1"), references("mistral_v1"), "t/meta", parts)
    assert routes == ["full", "full", "full", "full", "append"]


def test_files_with_a_pre_split_get_no_appender(assets: dict[str, Path]):
    assert SessionTokenizer.from_file(assets["gpt2"]).encoder._appender is None
    assert SessionTokenizer.from_file(assets["mistral_v3"]).encoder._appender is not None


def test_tails_live_only_as_long_as_their_states(assets: dict[str, Path]):
    """The appender keeps no state alive: a session evicted or forgotten takes its tail along
    (before, the tails held their states, up to 256 MiB beside the session budget)."""
    tok = SessionTokenizer.from_file(assets["mistral_v1"], store_bytes=64 << 10)
    appender = tok.encoder._appender
    assert appender is not None
    sessions = [f"t/{k}" for k in range(40)]
    for k, session in enumerate(sessions):  # ~4 KB states: the budget holds a dozen or so
        text = f"[INST] {k} " + "lorem ipsum dolor " * 100
        tok.encode(text, session=session)
        tok.encode(text + " sit amet", session=session)
    gc.collect()
    held = sum(tok.store.get(store_key(s)) is not None for s in sessions)
    assert 0 < held < len(sessions) and appender.held()[0] <= held
    for session in sessions:
        tok.forget(session)
    gc.collect()
    assert appender.held() == (0, 0)
