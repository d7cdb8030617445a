"""The SentencePiece appender feeds its incremental BPE, and searches for added tokens, a slice
of characters at a time (so no step holds the GIL for long): with tiny slices, every call's ids
and ends still equal the reference's."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.sessions import SessionTokenizer
from app.tokenization import bpe_appends
from app.tokenization.reference import ReferenceEncoder
from tests.tokenization.test_bpe_appends import FAMILIES, appends, grow, references, tokenizers

__all__ = ["references", "tokenizers"]  # the fixtures, shared


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    name=st.sampled_from(FAMILIES),
    parts=appends,
    session=st.integers(0, 10**9),
    size=st.integers(1, 5),
)
def test_sliced_feeds_give_the_reference_ids(
    tokenizers: Callable[[str], SessionTokenizer],
    references: Callable[[str], ReferenceEncoder],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    parts: list[str],
    session: int,
    size: int,
) -> None:
    monkeypatch.setattr(bpe_appends, "_SLICE_CHARS", size)
    grow(tokenizers(name), references(name), f"sliced-{session}", parts)
