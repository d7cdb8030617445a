"""The reference encoder's ids and ends, converted a slice at a time (so no step holds the GIL
for long), equal those of one conversion of the engine's whole answer."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.tokenization import reference as module
from app.tokenization.reference import ReferenceEncoder, char_to_byte_offsets


@given(st.lists(st.integers(0, 2**31 - 1), max_size=300), st.integers(1, 70))
def test_a_sliced_conversion_equals_one(values: list[int], size: int) -> None:
    pairs = [(v, v // 2) for v in values]
    slice_size, module._SLICE = module._SLICE, size
    try:
        for listed in (list(values), pairs[:]):
            expected = np.asarray(listed, dtype=np.int32)
            found = module.int32_array(listed)
            assert found.dtype == np.int32 and found.shape == expected.shape
            assert np.array_equal(found, expected) and listed == []
    finally:
        module._SLICE = slice_size


@pytest.mark.parametrize("name", ["smollm2", "mistral_v1"])
def test_ids_and_ends_of_texts_longer_than_a_slice(
    reference: Callable[[str], Tokenizer], name: str
) -> None:
    """A byte-level vocabulary (ends from the tokens' lengths) and a SentencePiece one (ends
    from the engine's offsets), each on texts of several slices of ids and a short one."""
    tokenizer = reference(name)
    words = ["héllo", "world", "\n", "  ", "数据", "a" * 7, "12345", "🙂", "it's"]
    long = " ".join(words[k % len(words)] for k in range(60_000))
    texts = [long, "short one", "", "a" * 300_000]
    found = ReferenceEncoder(tokenizer).encode_many(texts)
    assert max(len(ids) for ids, _ in found) > module._SLICE
    for text, (ids, ends) in zip(texts, found, strict=True):
        enc = tokenizer.encode(text, add_special_tokens=False)
        assert ids.tolist() == enc.ids
        if not enc.ids:
            assert len(ends) == 0
            continue
        table = char_to_byte_offsets(text)
        starts = [int(table[a]) for a, _ in enc.offsets]
        # each token ends where the next begins, the last at the text's end
        assert ends.tolist() == [*starts[1:], len(text.encode("utf-8"))]
