"""The native encoder's piece caches and its batched NFC give what merging and normalizing
each piece alone give: long pieces and pieces of many ids come back from the long-piece table
equal to the reference, after it has been emptied too, and with two models sharing a thread;
short pieces of many ids come back from the compact table's run of them, after its rounds
have wrapped too."""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.tokenization.native.encoder import NativeEncoder
from app.tokenization.native.nfc import _each_normalized
from app.tokenization.reference import ReferenceEncoder


def _long_pieces(seed: int, count: int) -> str:
    """``count`` distinct pieces of 25 to 60 letters (past the short table's 24 bytes), and
    runs of CJK and Thai (few bytes per character, many ids per piece), space-separated."""
    draw = random.Random(seed)
    words = {
        "".join(draw.choices("abcdefghijklmnopqrstuvwxyz", k=draw.randint(25, 60)))
        for _ in range(count)
    }
    scripts = ["".join(draw.choices("中文日本語漢字", k=draw.randint(4, 9))) for _ in range(50)]
    thai = ["".join(draw.choices("กขคงจฉชซ", k=draw.randint(3, 8))) for _ in range(50)]
    return " ".join([*sorted(words), *scripts, *thai])


@pytest.mark.parametrize("names", [("qwen3", "llama3"), ("gemma3", "smollm2")])
def test_long_pieces_come_back_from_the_cache_exact(
    names: tuple[str, str], reference: Callable[[str], Tokenizer]
) -> None:
    """More distinct long pieces than the long table keeps (it empties when full), encoded
    again from the cache, by two models in turn on one thread (each its own entries)."""
    tokenizers = [reference(name) for name in names]
    encoders = [NativeEncoder(ReferenceEncoder(t)) for t in tokenizers]
    texts = [_long_pieces(38, 7_000), _long_pieces(39, 300)]
    for _ in range(2):
        for text in texts:
            for tokenizer, encoder in zip(tokenizers, encoders, strict=True):
                got = encoder.encode(text)
                assert got is not None
                want = tokenizer.encode(text, add_special_tokens=False).ids
                assert got[0].tolist() == want


def _short_pieces_of_many_ids(seed: int, count: int) -> str:
    """``count`` distinct runs of 7 to 15 rare punctuation marks, each after a space (a piece
    of up to 16 bytes that most vocabularies split into more than three ids)."""
    draw = random.Random(seed)
    marks = "~`^|{}[]<>?;@#$%&*+=!"
    runs = {"".join(draw.choices(marks, k=draw.randint(7, 15))) for _ in range(count)}
    return "x " + " ".join(sorted(runs))


@pytest.mark.parametrize("names", [("gpt2", "llama3")])
def test_short_pieces_of_many_ids_come_back_exact_after_the_rounds_wrap(
    names: tuple[str, str], reference: Callable[[str], Tokenizer]
) -> None:
    """More ids of short pieces than the compact table's run of them holds (it starts a new
    round when full, and entries of an earlier round are misses), then the first of them
    again (their entries of an earlier round), then all again, by one model after the other
    on one thread (the same pieces of two models take each other's entries)."""
    tokenizers = [reference(name) for name in names]
    encoders = [NativeEncoder(ReferenceEncoder(t)) for t in tokenizers]
    text = _short_pieces_of_many_ids(42, 9_000)
    many = sum(len(tokenizers[0].encode(" " + run, add_special_tokens=False).ids) > 3
               for run in text.split(" ")[1:])  # fmt: skip
    assert many > 8_000  # over 32K ids: the run of 16K wraps twice at least
    for tokenizer, encoder in zip(tokenizers, encoders, strict=True):  # the one thread's table
        for sample in (text, text[:20_000], text):
            got = encoder.encode(sample)
            assert got is not None
            assert got[0].tolist() == tokenizer.encode(sample, add_special_tokens=False).ids


@given(
    windows=st.lists(
        st.text(alphabet="ae\u0301\u0323\u0302\n \u1100\u1161\u11a8A\u030a", max_size=12),
        max_size=30,
    )
)
def test_windows_normalized_together_as_each_alone(windows: list[str]) -> None:
    """One NFC of the windows joined by newlines, cut back apart, is each window's NFC, with
    newlines inside windows and at their edges; the windows lie in a text with gaps between."""
    parts = [w.encode() for w in windows]
    data = b"x".join(parts)
    ends = np.cumsum([len(p) + 1 for p in parts], dtype=np.int64) - 1
    begins = ends - np.asarray([len(p) for p in parts], dtype=np.int64)
    got = _each_normalized(data, begins, ends)
    want = [unicodedata.normalize("NFC", w).encode() for w in windows]
    at, size = got.begin.tolist(), got.length.tolist()
    assert [got.text[a : a + n] for a, n in zip(at, size, strict=True)] == want
    assert got.changed.tolist() == [new != old for new, old in zip(want, parts, strict=True)]
