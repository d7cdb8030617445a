"""The native encoder's exactness campaign: a million random adversarial strings per family
(``-m slow``; ``TOKSPLICE_NATIVE_CAMPAIGN`` strings instead), every one against the reference.

The strings come from ``tests.adversarial_strings`` (``random``: a million hypothesis
examples would take hours).  Kimi K2's vocabulary is not offline: its split and special tokens
on o200k's ranks (``test_built_vocabularies``) stand in.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from app.tokenization.native.encoder import NativeEncoder
from app.tokenization.reference import ReferenceEncoder
from tests.adversarial_strings import adversarial_strings
from tests.tokenization.test_built_vocabularies import build_kimi
from tests.tokenization.test_native import NATIVE_FAMILIES

_BATCH = 20_000


@pytest.mark.slow
@pytest.mark.parametrize("name", [*NATIVE_FAMILIES, "kimi"])
def test_a_million_strings(
    name: str, reference: Callable[[str], Tokenizer], assets: dict[str, Path], tmp_path: Path
) -> None:
    if name == "kimi":
        tokenizer = Tokenizer.from_file(str(build_kimi(assets, tmp_path / "kimi.json")))
    else:
        tokenizer = reference(name)
    encoder = NativeEncoder(ReferenceEncoder(tokenizer))
    total = int(os.environ.get("TOKSPLICE_NATIVE_CAMPAIGN", "1000000"))
    checked = declined = 0
    for batch in range(0, total, _BATCH):
        strings = adversarial_strings(batch, min(_BATCH, total - batch))
        wanted = tokenizer.encode_batch_fast(strings, add_special_tokens=False)
        for text, want in zip(strings, wanted, strict=True):
            got = encoder.encode(text)
            if got is None:
                declined += 1
                continue
            assert got[0].tolist() == want.ids, text
            checked += 1
    reasons = encoder.stats()["declined"]
    print(f"\n{name}: {checked} strings equal, {declined} declined {reasons}", file=sys.stderr)
    assert checked + declined == total and sum(reasons.values()) == declined
