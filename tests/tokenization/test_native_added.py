"""The added-token search in C equals the reference's split and the Python search: random
token sets that overlap and run into each other (few leads: a compare per lead, 64 bytes at a
time; many: the lead table), across the 64-byte edges, multi-byte tokens, and every covered
vocabulary's own added tokens in adversarial text; again with the 16-byte compares."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.tokenization.native.added_tokens import NativeAddedSpans
from gpu_kernels.payload import Found, SpansWithIds
from tests.adversarial import texts
from tests.gpu_kernels.conftest import differential
from tests.gpu_kernels.test_added_split import hf_spans
from tests.tokenization.test_native import NATIVE_FAMILIES, _rerun_differential_tests

_FEW = "ab<|é"
_MANY = "abcdefgh<|é\U0001f600"
"""Alphabets of the tokens and the text: 3-5 leads (compares), or up to 10 (the lead table)."""


def _spans(found: Found) -> list[tuple[int, int, int]]:
    begin, end, ids = found
    return list(zip(begin.tolist(), end.tolist(), ids.tolist(), strict=True))


def _token_sets(alphabet: str) -> st.SearchStrategy[list[str]]:
    return st.lists(st.text(alphabet=alphabet, min_size=1, max_size=5), min_size=1, max_size=12,
                    unique=True)  # fmt: skip


@differential(500)
@given(alphabet=st.sampled_from([_FEW, _MANY]), data=st.data())
def test_random_token_sets_split_as_the_reference_does(alphabet: str, data: st.DataObject) -> None:
    tokens = data.draw(_token_sets(alphabet))
    parts = st.one_of(st.sampled_from(tokens), st.text(alphabet=alphabet, max_size=3))
    # a run first, so that the tokens after it straddle the 64-byte edges at random
    text = "x" * data.draw(st.integers(0, 140)) + "".join(data.draw(st.lists(parts, max_size=40)))
    table = {t.encode(): k + 7 for k, t in enumerate(tokens)}
    utf8 = text.encode()
    found = _spans(NativeAddedSpans(table)(utf8))
    assert found == _spans(SpansWithIds(table)(utf8))
    want = hf_spans(dict.fromkeys(tokens, False), text)
    assert [(b, e) for b, e, _ in found] == want
    assert all(table[utf8[b:e]] == i for b, e, i in found)


@pytest.fixture(scope="module")
def searches(
    reference: Callable[[str], Tokenizer],
) -> Callable[[str], tuple[list[str], NativeAddedSpans, SpansWithIds]]:
    """``name ->`` (that vocabulary's added tokens, the C search, the Python search)."""

    @functools.cache
    def build(name: str) -> tuple[list[str], NativeAddedSpans, SpansWithIds]:
        added = reference(name).get_added_tokens_decoder()
        table = {token.content.encode(): i for i, token in added.items()}
        return (
            sorted(t.content for t in added.values()),
            NativeAddedSpans(table),
            SpansWithIds(table),
        )

    return build


@pytest.mark.parametrize("name", NATIVE_FAMILIES)
@differential(200)
@given(data=st.data())
def test_each_vocabularys_tokens_in_adversarial_text(
    name: str,
    data: st.DataObject,
    searches: Callable[[str], tuple[list[str], NativeAddedSpans, SpansWithIds]],
) -> None:
    contents, native, python = searches(name)
    parts = st.one_of(
        st.sampled_from(contents),
        st.sampled_from(contents).map(lambda t: t[: len(t) // 2]),  # a token's start alone
        texts,
    )
    utf8 = "".join(data.draw(st.lists(parts, max_size=20))).encode()
    assert _spans(native(utf8)) == _spans(python(utf8))


def test_dense_and_empty_text() -> None:
    table = {b"<|": 1, b"<|a|>": 2, b"|>": 3, b"<": 4}
    for utf8 in (b"", b"xyz", b"<|" * 50_000 + b"a|>", b"<" * 100_000, b"<|a|" * 20_000):
        assert _spans(NativeAddedSpans(table)(utf8)) == _spans(SpansWithIds(table)(utf8))
    begin, end, ids = NativeAddedSpans(table)(b"")
    assert begin.dtype == end.dtype == np.int64 and ids.dtype == np.int32 and not len(ids)


def test_inconsistent_arrays_are_refused() -> None:
    from app.tokenization.native._native import AddedTokens

    starts = np.asarray([0, 1, 1], dtype=np.int32)
    labels = (np.asarray([0, 0, 1], np.int32), np.asarray([62], np.uint8))
    AddedTokens(starts, np.asarray([60], np.uint8), np.asarray([1], np.int32),
                np.asarray([-1, 5], np.int32), *labels)  # fmt: skip
    with pytest.raises(ValueError, match="trie"):  # an edge to the root
        AddedTokens(starts, np.asarray([60], np.uint8), np.asarray([0], np.int32),
                    np.asarray([-1, 5], np.int32), *labels)  # fmt: skip
    with pytest.raises(ValueError, match="trie"):  # edges past the last node's
        AddedTokens(np.asarray([0, 2, 1], np.int32), np.asarray([60, 61], np.uint8),
                    np.asarray([1, 1], np.int32), np.asarray([-1, 5], np.int32),
                    *labels)  # fmt: skip
    with pytest.raises(ValueError, match="trie"):  # a label past the labels' bytes
        AddedTokens(starts, np.asarray([60], np.uint8), np.asarray([1], np.int32),
                    np.asarray([-1, 5], np.int32), np.asarray([0, 0, 2], np.int32),
                    labels[1])  # fmt: skip
    with pytest.raises(ValueError, match="trie"):  # labels out of order
        AddedTokens(starts, np.asarray([60], np.uint8), np.asarray([1], np.int32),
                    np.asarray([-1, 5], np.int32), np.asarray([0, 2, 1], np.int32),
                    labels[1])  # fmt: skip


def test_the_16_byte_compares_where_the_cpu_has_the_wide_ones() -> None:
    """Where the CPU has AVX-512, the leads of 64 bytes are found by one compare each and the
    SSE2 compares never run in this process: this module's differential tests run again in a
    child with AVX-512 turned off (``TOKSPLICE_NATIVE_SCALAR=1``)."""
    _rerun_differential_tests(
        "TOKSPLICE_NATIVE_SCALAR",
        "1",
        "WIDE_ASCII",
        "0",
        module=__file__,
        selected="split or tokens or dense",
    )
