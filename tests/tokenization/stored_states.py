"""Helpers of the shared-store tests: reference states and their comparison."""

from __future__ import annotations

import functools

import numpy as np
from tokenizers import Tokenizer

from app.tokenization.reference import ReferenceEncoder
from app.tokenization.store import SessionState

FINGERPRINT = b"\x01" * 8
"""The tokenizer fingerprint the tests' stores run under."""


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
