"""The Tekken tokenizer.json encodes as transformers' own conversion of the tekken file (the one
vLLM and SGLang load through transformers): same ids on adversarial text and on special-token
text.

transformers reads a tekken file without a ``special_tokens`` list through mistral-common
(not installed here); the copy given to it lists the same control tokens (ranks 0-19), which
is what mistral-common supplies for such a file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer
from transformers.integrations.mistral.tokenizer import MistralConverter

from app.tools.converters import TEKKEN_SPECIAL_TOKENS
from tests.adversarial_strings import adversarial_strings


@pytest.fixture(scope="module")
def pair(
    assets: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Tokenizer, Tokenizer]:
    ours = assets["tekken"]
    data = json.loads((ours.parent / "tekken_240911.json").read_text(encoding="utf-8"))
    data["special_tokens"] = [
        {"rank": i, "token_str": text, "is_control": True}
        for i, text in enumerate(TEKKEN_SPECIAL_TOKENS)
    ]
    listed = tmp_path_factory.mktemp("tekken") / "tekken.json"
    listed.write_text(json.dumps(data), encoding="utf-8")
    return Tokenizer.from_file(str(ours)), MistralConverter(str(listed)).converted()


def test_same_ids_as_transformers_conversion(pair: tuple[Tokenizer, Tokenizer]) -> None:
    ours, theirs = pair
    assert ours.get_vocab_size() == theirs.get_vocab_size()
    texts = [
        *adversarial_strings(7, 3000),
        "[INST]hi[/INST]ok</s>[TOOL_CALLS]f[ARGS]{}<SPECIAL_999> 1234 it's",
    ]
    got = ours.encode_batch_fast(texts, add_special_tokens=False)
    want = theirs.encode_batch_fast(texts, add_special_tokens=False)
    for text, a, b in zip(texts, got, want, strict=True):
        assert a.ids == b.ids, text
