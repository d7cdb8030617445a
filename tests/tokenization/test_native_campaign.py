"""The native encoder's exactness campaign: a million random adversarial strings per family
(``-m slow``; ``TOKSPLICE_NATIVE_CAMPAIGN`` strings instead), every one against the reference.

The strings are drawn with ``random`` rather than hypothesis (a million examples would take
hours there) from the session tests' traps, the added tokens of every covered vocabulary,
digits of every script, marks, whitespace of every kind, and arbitrary code points.
"""

from __future__ import annotations

import os
import random
import sys
import unicodedata
from collections.abc import Callable

import pytest
from tokenizers import Tokenizer

from app.tokenization.native.encoder import NativeEncoder
from app.tokenization.reference import ReferenceEncoder
from tests.adversarial import TRAPS
from tests.gpu_kernels.conftest import _CASE_TRAPS, _SEGMENT_TRAPS, _SPECIALS, FAMILIES

_BATCH = 20_000
_DIGITS = "".join(c for c in map(chr, range(0x30000)) if unicodedata.category(c) == "Nd")
_MARKS = "".join(c for c in map(chr, range(0x3000)) if unicodedata.category(c).startswith("M"))
_SPACES = " \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2007\u200a\u2028\u2029\u202f\u205f\u3000"
_ASCII = "".join(map(chr, range(0x20, 0x7F))) + "\n\n\n    '''sSTtlLdD"


def _fragment(rng: random.Random) -> str:
    kind = rng.randrange(9)
    if kind == 0:
        return rng.choice(TRAPS)
    if kind == 1:
        return rng.choice(_SPECIALS)
    if kind == 2:
        start = rng.randrange(0, len(_DIGITS) - 10, 10)  # one script's ten digits
        return "".join(rng.choices(_DIGITS[start : start + 10], k=rng.randint(1, 8)))
    if kind == 3:
        return rng.choice("aeoAEOnN中ア") + "".join(rng.choices(_MARKS, k=rng.randint(1, 3)))
    if kind == 4:
        return "".join(rng.choices(_SPACES, k=rng.randint(1, 5)))
    if kind == 5:
        return "".join(rng.choices(_CASE_TRAPS + _SEGMENT_TRAPS, k=rng.randint(1, 8)))
    if kind == 6:
        return "".join(rng.choices(_ASCII, k=rng.randint(1, 10)))
    top = 0x10FFFF if kind == 7 else 0x3000
    points = [rng.randrange(top) for _ in range(rng.randint(1, 3))]
    return "".join(chr(p) for p in points if not 0xD800 <= p < 0xE000)


def adversarial_strings(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(_fragment(rng) for _ in range(rng.randint(0, 12))) for _ in range(count)]


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_a_million_strings(name: str, reference: Callable[[str], Tokenizer]) -> None:
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
