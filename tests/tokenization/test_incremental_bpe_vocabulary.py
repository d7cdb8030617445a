"""Vocabulary normalization on random BPE models: several rules per token (as SentencePiece
conversions write), tokens no encoding reaches, rules that never fire.  Whatever the model,
the incremental BPE equals HF tokenizers' BPE on it, or the model is refused as improper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.byte_level import bytes_to_unicode
from app.tokenization.incremental_bpe import IncrementalBPE, VocabularyError
from loadtest.bpe_reference import reference_bpe

LETTERS = "abc"


def write_model(path: Path, merges: list[tuple[str, str]], extra: list[str]) -> Path:
    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    for token in extra:
        vocab.setdefault(token, len(vocab))
    model = {"type": "BPE", "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}
    document = {"model": model, "decoder": {"type": "ByteLevel"}}
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@st.composite
def random_models(draw: st.DrawFn) -> tuple[list[tuple[str, str]], list[str]]:
    tokens = list(LETTERS)
    merges: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(1, 40))):
        left = draw(st.sampled_from(tokens))
        right = draw(st.sampled_from(tokens))
        if (left, right) not in merges and len(left + right) <= 8:
            merges.append((left, right))
            if left + right not in tokens:
                tokens.append(left + right)
    extra = draw(st.lists(st.text(LETTERS, min_size=2, max_size=5), max_size=3))  # no rule
    return merges, extra


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=random_models(),
    inputs=st.lists(st.text(LETTERS + " ", max_size=60), min_size=1, max_size=5),
)
def test_random_models_equal_reference(
    tmp_path_factory: pytest.TempPathFactory,
    model: tuple[list[tuple[str, str]], list[str]],
    inputs: list[str],
) -> None:
    path = write_model(tmp_path_factory.mktemp("model") / "tokenizer.json", *model)
    try:
        engine = IncrementalBPE.from_file(path, use_cache=False)
    except VocabularyError as error:
        assert "cannot be made proper" in str(error)
        assume(False)
    reference = reference_bpe(path)
    for text in inputs:
        data = text.encode()
        state = engine.start()
        final: list[int] = []
        expected = reference(data)
        for byte in range(len(data)):
            final += state.feed(data[byte : byte + 1])
            assert final == expected[: len(final)]
        assert state.ids() == expected


def test_rule_ranked_before_its_part_is_refused(tmp_path: Path) -> None:
    """``abc d`` ranked before ``ab c``: HF merges ``abc d`` the moment ``abc`` appears, out of
    rank order, which no proper vocabulary expresses: refused, naming the token."""
    path = write_model(tmp_path / "tokenizer.json", [("a", "b"), ("ab", "c"), ("abc", "d")], [])
    assert IncrementalBPE.from_file(path, use_cache=False).encode(b"abcd") == reference_bpe(path)(
        b"abcd"
    )
    path = write_model(tmp_path / "tokenizer.json", [("a", "b"), ("abc", "d"), ("ab", "c")], [])
    with pytest.raises(VocabularyError, match=r"cannot be made proper: token b'abcd'"):
        IncrementalBPE.from_file(path, use_cache=False)


def test_bytes_without_token_are_dropped_like_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    model = {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}
    path.write_text(json.dumps({"model": model, "decoder": {"type": "ByteLevel"}}), "utf-8")
    engine = IncrementalBPE.from_file(path, use_cache=False)
    assert engine.encode(b"xaby") == reference_bpe(path)(b"xaby") == [2]
    path.write_text(json.dumps({"model": model, "decoder": None}), "utf-8")  # characters
    with pytest.raises(VocabularyError, match="no token and no byte fallback"):
        IncrementalBPE.from_file(path, use_cache=False)
