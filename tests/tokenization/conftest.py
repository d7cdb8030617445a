"""Fixtures of the tokenization tests."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.sessions import SessionTokenizer
from app.sessions.memory import MemoryStore
from app.sessions.redis_store import RedisStore
from app.tokenization.incremental_bpe import IncrementalBPE
from app.tokenization.state import SessionState
from loadtest.agent_sessions import MARKUPS, session_calls
from loadtest.redis_writes import stored_states
from tests.services import RedisServer
from tests.tokenization.stored_states import FINGERPRINT


@pytest.fixture(scope="session")
def incremental_bpe(
    assets: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], IncrementalBPE]:
    """``name -> IncrementalBPE`` for the assets, tables built once per test session."""
    cache = tmp_path_factory.mktemp("ibpe-cache")
    return functools.cache(lambda name: IncrementalBPE.from_file(assets[name], cache_dir=cache))


PRE_SPLIT_FAMILIES = [
    "qwen3", "llama3", "deepseek_v3", "gpt2", "cl100k", "o200k", "smollm2", "tekken", "qwen35",
    "gemma3",
]  # fmt: skip
"""The families whose repair is proven: pre-tokenized byte-level BPE, and Gemma-3's spaces
replaced by "▁" (no pre-split: its cuts come from the vocabulary and the added tokens)."""


@pytest.fixture(scope="module")
def session_tokenizers(assets: dict[str, Path]) -> dict[str, SessionTokenizer]:
    """A session tokenizer per pre-split family, fresh for each test module; a small window
    makes cut searches retry more often, and small parallel chunks cut every cold start and
    long fresh stretch into several (the native encoder's into at most two per core)."""
    return {
        name: SessionTokenizer.from_file(assets[name], window=64, parallel_chunk=48)
        for name in PRE_SPLIT_FAMILIES
    }


@pytest.fixture(scope="session")
def states(assets: dict[str, Path]) -> list[SessionState]:
    """Twelve successive calls of one agent session (~20K characters), as a session tokenizer
    stores them (appends extend their parent's arrays in place)."""
    return stored_states(
        assets["qwen3"], session_calls(8, MARKUPS["qwen3"], target_chars=20_000, max_calls=12)
    )


@pytest.fixture
def make_store(redis_server: RedisServer) -> Iterator[Callable[..., RedisStore]]:
    """``make(url=the test server, **options) -> RedisStore``, all closed after the test."""
    made: list[RedisStore] = []

    def make(url: str = redis_server.url, **options: object) -> RedisStore:
        options = {"tokenizer": FINGERPRINT, "local": MemoryStore(64 << 20), **options}
        store = RedisStore(url, **options)  # type: ignore[arg-type]
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
