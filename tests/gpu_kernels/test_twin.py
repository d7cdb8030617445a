"""The twin's ids equal the reference's on adversarial and real text, family by family."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from gpu_kernels import TwinEncoder, UnsupportedTokenizer
from loadtest.agent_sessions.session import corpus
from tests.adversarial import long_texts, texts
from tests.gpu_kernels.conftest import FAMILIES, case_texts, differential

# Texts dense in the places the predicate decides: runs of each class meeting every other.
_DENSE = "aZſǅʰ \t\n\r\u00a0\u3000'.(/1٣é\u0301中👍sStTlLrReEvVdDmM"
dense_texts = st.text(alphabet=_DENSE, max_size=60)


def assert_exact(tokenizer: Tokenizer, twin: TwinEncoder, text: str) -> None:
    """The encoder's ids equal the reference's for ``text``."""
    assert twin.encode(text).tolist() == tokenizer.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", FAMILIES)
@differential(250)
@given(text=st.one_of(texts, long_texts, dense_texts, case_texts, st.text(max_size=40)))
def test_adversarial_text(
    name: str,
    text: str,
    reference: Callable[[str], Tokenizer],
    twin: Callable[[str], TwinEncoder],
) -> None:
    assert_exact(reference(name), twin(name), text)


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agent_transcripts(
    name: str,
    seed: int,
    reference: Callable[[str], Tokenizer],
    twin: Callable[[str], TwinEncoder],
) -> None:
    assert_exact(reference(name), twin(name), corpus(seed, 150_000))


def test_added_tokens_split_first(
    reference: Callable[[str], Tokenizer], twin: Callable[[str], TwinEncoder]
) -> None:
    text = "<|im_start|>user\nhi<|im_end|><|im_start|><|im_start|>x <|endoftext|>'s"
    ids = twin("qwen3").encode(text).tolist()
    assert ids == reference("qwen3").encode(text, add_special_tokens=False).ids
    assert ids.count(reference("qwen3").token_to_id("<|im_start|>")) == 3


@pytest.mark.parametrize("name", ["smollm2", "mistral_v1"])
def test_uncovered_families_are_refused(name: str, reference: Callable[[str], Tokenizer]) -> None:
    with pytest.raises(UnsupportedTokenizer):
        TwinEncoder(reference(name))


def test_a_character_removing_split_is_refused(reference: Callable[[str], Tokenizer]) -> None:
    """``spec`` admits this GGUF step for repair; the twin would encode the removed bytes."""
    document = json.loads(reference("llama3").to_str())
    removal = {"type": "Split", "pattern": {"Regex": "[\x01]"}, "behavior": "Removed"}
    document["pre_tokenizer"]["pretokenizers"].append(removal | {"invert": False})
    with pytest.raises(UnsupportedTokenizer, match="3 steps"):
        TwinEncoder(Tokenizer.from_str(json.dumps(document)))
