"""The BPE stage alone: merge rounds over many pieces equal the reference model's ``tokenize``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.byte_level import bytes_to_unicode
from gpu_kernels.byte_bpe import MergeTable
from tests.gpu_kernels.conftest import FAMILIES, differential

_SYMBOL = bytes_to_unicode()
# Pieces as the predicate hands them over, plus long repeats (runs of one pair rank) and raw
# bytes that are not UTF-8.
pieces = st.one_of(
    st.text(min_size=1, max_size=24).map(str.encode),
    st.sampled_from([" the", "'s", "    ", "1234", "\n\n", "a" * 16, "=" * 40]).map(str.encode),
    st.binary(min_size=1, max_size=12),
    st.text(alphabet="ab ", min_size=1, max_size=64).map(str.encode),
)


@pytest.mark.parametrize("name", FAMILIES)
@differential(150)
@given(batch=st.lists(pieces, min_size=1, max_size=12))
def test_merge_rounds_equal_reference_model(
    name: str,
    batch: list[bytes],
    reference: Callable[[str], Tokenizer],
    merge_table: Callable[[str], MergeTable],
) -> None:
    tokenizer, table = reference(name), merge_table(name)
    got = [table.merge([piece])[0].tolist() for piece in batch]
    assert [ids.tolist() for ids in table.merge(batch)] == got  # a batch = each piece alone
    for piece, ids in zip(batch, got, strict=True):
        whole = table.whole_word(piece)
        symbols = "".join(_SYMBOL[b] for b in piece)
        expected = [t.id for t in tokenizer.model.tokenize(symbols)]
        assert ([whole] if whole is not None else ids) == expected
