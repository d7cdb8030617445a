"""Stage by stage: class table + predicate + compaction equal the engine's own pre-tokenizer."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from gpu_kernels.char_classes import ClassTable, code_points
from gpu_kernels.piece_starts import PREDICATES, piece_bounds
from tests.adversarial import texts
from tests.gpu_kernels.conftest import FAMILIES, differential

# Contexts that reveal each class of an arbitrary character c: letter prefix and run,
# digit grouping, whitespace hand-over, punctuation runs and newline absorption, contractions.
_CONTEXTS = ("a{}", "{}a", "1{}", "12{}3", " {}a", "{}{} a", "'{}x", "'s{}", ".{}\n", "\n{}{}")


def _pieces(
    tokenizer: Tokenizer, family: str, classes: ClassTable, text: str
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    points = code_points(text)
    cls, folds = classes.lookup(points)
    begin, end = piece_bounds(PREDICATES[family](cls, folds, points))
    expected = [offsets for _, offsets in tokenizer.pre_tokenizer.pre_tokenize_str(text)]
    return list(zip(begin.tolist(), end.tolist(), strict=True)), expected


@pytest.mark.parametrize("name", ["qwen3", "llama3", "gpt2"])
@differential(400)
@given(
    char=st.characters(exclude_categories=["Cs"]), context=st.sampled_from(_CONTEXTS), tail=texts
)
def test_every_character_in_revealing_contexts(
    name: str,
    char: str,
    context: str,
    tail: str,
    reference: Callable[[str], Tokenizer],
    class_table: ClassTable,
) -> None:
    text = context.format(char, char) + tail
    got, expected = _pieces(reference(name), FAMILIES[name], class_table, text)
    assert got == expected


@pytest.mark.parametrize("block", [0x0, 0x1, 0x2, 0x3, 0xF, 0x1F])
def test_class_table_block_by_block(
    block: int, reference: Callable[[str], Tokenizer], class_table: ClassTable
) -> None:
    """Every code point of a block, each in every revealing context, split like the engine."""
    chars = [chr(c) for c in range(block << 12, (block + 1) << 12) if not 0xD800 <= c < 0xE000]
    text = "\n".join(context.format(c, c) for c in chars for context in _CONTEXTS)
    got, expected = _pieces(reference("llama3"), "cl100k", class_table, text)
    assert got == expected
