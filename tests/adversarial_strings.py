"""Random adversarial strings, fast to draw in bulk (a million take seconds, hypothesis hours):
the session tests' traps, the added tokens of every covered vocabulary, digits of every script,
marks, whitespace of every kind, and arbitrary code points.  The native encoder's campaign and
``loadtest/bench_cold_start.py``'s divergence counts draw from here."""

from __future__ import annotations

import random
import unicodedata

from tests.adversarial import TRAPS
from tests.gpu_kernels.conftest import _CASE_TRAPS, _SEGMENT_TRAPS, _SPECIALS

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
