"""Stage by stage: class table + predicate + compaction equal the engine's own pre-tokenizer."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from gpu_kernels.char_classes import ClassTable, code_points
from gpu_kernels.piece_starts import PREDICATES, piece_bounds
from tests.adversarial import long_texts, texts
from tests.gpu_kernels.conftest import FAMILIES, case_texts, differential

# Contexts that reveal each class of an arbitrary character c: letter prefix and run,
# digit grouping, whitespace hand-over, punctuation runs and newline absorption, contractions;
# o200k's case classes (after an uppercase letter, before a lowercase one, before an uppercase
# one after a lowercase one), marks as letters or punctuation, `/` after newlines.
_CONTEXTS = ("a{}", "{}a", "1{}", "12{}3", " {}a", "{}{} a", "'{}x", "'s{}", ".{}\n", "\n{}{}")
_CASE_CONTEXTS = ("A{}", "A{}.", "{}A.", "a{}A", "({}\n/", "{}'S", "中{}A")


def _pieces(
    tokenizer: Tokenizer, family: str, classes: ClassTable, text: str
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    points = code_points(text)
    begin, end = piece_bounds(PREDICATES[family](classes.lookup(points), points))
    expected = [offsets for _, offsets in tokenizer.pre_tokenizer.pre_tokenize_str(text)]
    return list(zip(begin.tolist(), end.tolist(), strict=True)), expected


@pytest.mark.parametrize("name", ["qwen3", "llama3", "gpt2", "o200k", "deepseek_v3"])
@differential(400)
@given(
    char=st.characters(exclude_categories=["Cs"]),
    context=st.sampled_from(_CONTEXTS + _CASE_CONTEXTS),
    tail=texts,
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


@pytest.mark.parametrize("name", FAMILIES)
@differential(300)
@given(text=st.one_of(texts, long_texts, case_texts).filter(bool))
def test_adversarial_pieces(
    name: str, text: str, reference: Callable[[str], Tokenizer], class_table: ClassTable
) -> None:
    """Piece for piece (ids can hide a misplaced start: both halves may encode alike)."""
    got, expected = _pieces(reference(name), FAMILIES[name], class_table, text)
    assert got == expected


@pytest.mark.parametrize("name", ["llama3", "o200k", "deepseek_v3"])
@pytest.mark.parametrize("block", [0x0, 0x1, 0x2, 0x3, 0xF, 0x1F])
def test_class_table_block_by_block(
    name: str, block: int, reference: Callable[[str], Tokenizer], class_table: ClassTable
) -> None:
    """Every code point of a block, each in every revealing context, split like the engine."""
    chars = [chr(c) for c in range(block << 12, (block + 1) << 12) if not 0xD800 <= c < 0xE000]
    contexts = _CONTEXTS + (_CASE_CONTEXTS if name == "o200k" else ())
    text = "\n".join(context.format(c, c) for c in chars for context in contexts)
    got, expected = _pieces(reference(name), FAMILIES[name], class_table, text)
    assert got == expected
