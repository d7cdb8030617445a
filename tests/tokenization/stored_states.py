"""Helpers of the shared-store tests: reference states and their comparison."""

from __future__ import annotations

import functools

import numpy as np
from tokenizers import Tokenizer

from app.sessions.memory import SessionKey
from app.sessions.redis_store import RedisStore
from app.tokenization.reference import ReferenceEncoder
from app.tokenization.state import SessionState

FINGERPRINT = b"\x01" * 8
"""The tokenizer fingerprint the tests' stores run under."""
KEY: SessionKey = ("t", "s:deltas")


def write(store: RedisStore, state: SessionState, key: SessionKey = KEY) -> None:
    store.put(key, state)
    assert store.flush()


def read(reader: RedisStore, key: SessionKey = KEY) -> SessionState | None:
    """What a replica finds that does not hold the session locally."""
    reader.local.drop(key)
    return reader.get(key)


def state_of(ref: Tokenizer, text: str) -> SessionState:
    """The reference encode of ``text`` as a stored state (ends in UTF-8 bytes)."""
    ids, ends = _encoder(ref).encode(text)
    return SessionState(text=text.encode(), ids=ids, ends=ends)


def same(a: SessionState | None, b: SessionState) -> bool:
    return (
        a is not None
        and a.text == b.text
        and np.array_equal(a.ids, b.ids)
        and np.array_equal(a.ends, b.ends)
    )


@functools.cache
def _encoder(ref: Tokenizer) -> ReferenceEncoder:
    return ReferenceEncoder(ref)  # building one reads the whole vocabulary
