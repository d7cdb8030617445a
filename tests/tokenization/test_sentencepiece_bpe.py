"""Mistral's SentencePiece BPE models (v1, v3 from mistral-common), converted to tokenizer.json,
encode exactly as sentencepiece itself; and the incremental BPE on the converted file, fed the
normalized text in arbitrary chunks with eager output, does too.

Texts holding a control or user-defined piece (``<s>``, ``[INST]``, ``[REFERENCE_DOC_0]``) are
left out: sentencepiece reads them as plain text, HF as added tokens, and typed special tokens are
the template layer's business (``typed_specials.py``)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
import sentencepiece
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.tokenization.bpe_appends import prepend_spaces
from app.tokenization.incremental_bpe import IncrementalBPE
from app.tools import sentencepiece_bpe
from tests.adversarial import texts

FAMILIES = ("mistral_v1", "mistral_v3")
REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_TEXT = [
    (REPO_ROOT / name).read_text(encoding="utf-8")
    for name in ("README.md", "app/sessions/tokenizer.py", "tests/adversarial.py")
]
family = st.sampled_from(FAMILIES)
wide_text = texts | st.text(max_size=200) | st.text(" \t\n▁ab", max_size=60)


@pytest.fixture(scope="session")
def processor(assets: dict[str, Path]) -> Callable[[str], sentencepiece.SentencePieceProcessor]:
    return functools.cache(
        lambda name: sentencepiece.SentencePieceProcessor(model_file=str(assets[f"{name}_model"]))
    )


@pytest.fixture(scope="session")
def converted(assets: dict[str, Path]) -> Callable[[str], Tokenizer]:
    return functools.cache(lambda name: Tokenizer.from_file(str(assets[name])))


@pytest.fixture(scope="session")
def engine(incremental_bpe: Callable[[str], IncrementalBPE]) -> Callable[[str], IncrementalBPE]:
    return incremental_bpe


def plain(text: str, tokenizer: Tokenizer) -> bool:
    return not any(added.content in text for added in tokenizer.get_added_tokens_decoder().values())


def incremental_ids(engine: IncrementalBPE, text: str, cuts: list[int]) -> list[int]:
    """Stream the text in parts (normalized part by part); check eager ids only ever grow."""
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    state = engine.start()
    final: list[int] = []
    for a, b in itertools.pairwise(points):
        part = prepend_spaces(text[a:b], at_start=a == 0)
        final += state.feed(part.encode("utf-8"))
        assert state.ids()[: len(final)] == final
    return final + state.pending()


def _without_control_text(text: str, tokenizer: Tokenizer) -> str:
    """``text`` with the control tokens' text taken out: the conversion splits it off as one
    added token (as transformers does), SentencePiece reads it as text (docs name them)."""
    controls = [t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special]
    while any(control in text for control in controls):
        for control in controls:
            text = text.replace(control, "")
    return text


@pytest.mark.parametrize("name", FAMILIES)
def test_real_text(name: str, processor, converted, engine):
    for text in (_without_control_text(t, converted(name)) for t in REAL_TEXT):
        expected = processor(name).encode(text)
        assert converted(name).encode(text, add_special_tokens=False).ids == expected
        assert incremental_ids(engine(name), text, list(range(0, len(text), 89))) == expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=family, text=wide_text, cuts=st.lists(st.integers(0, 1000), max_size=6))
def test_hypothesis_text(name: str, text: str, cuts: list[int], processor, converted, engine):
    assume(plain(text, converted(name)))
    expected = processor(name).encode(text)
    assert converted(name).encode(text, add_special_tokens=False).ids == expected
    assert incremental_ids(engine(name), text, cuts) == expected


def test_bos_and_decoding_match_sentencepiece(processor, converted):
    text = "Hello  world,\n日本語 😀"
    for name in FAMILIES:
        ids = converted(name).encode(text).ids
        assert ids == [processor(name).bos_id(), *processor(name).encode(text)]
        assert converted(name).decode(ids, skip_special_tokens=True) == text


def test_unsupported_models_are_refused(tmp_path: Path):
    path = tmp_path / "tokenizer.model"
    path.write_bytes(b"\x12\x02\x18\x01")  # trainer_spec { model_type: UNIGRAM }
    with pytest.raises(sentencepiece_bpe.SentencePieceError, match="not BPE"):
        sentencepiece_bpe.tokenizer_json(path)
