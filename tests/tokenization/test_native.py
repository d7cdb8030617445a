"""The native encoder's ids equal the reference's, family by family: adversarial text, long
pieces (the heap merge), real transcripts, threads, and what it must decline or refuse."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.tokenization import SessionTokenizer
from app.tokenization.native.encoder import NativeEncoder
from app.tokenization.native_route import CpuEncoder
from gpu_kernels import UnsupportedTokenizer
from gpu_kernels.char_classes import ClassTable
from loadtest.agent_sessions.session import corpus
from tests.adversarial import long_texts, texts
from tests.gpu_kernels.conftest import FAMILIES, case_texts, differential, spliced_texts

_DENSE = "aZſǅʰ \t\n\r\u00a0\u3000'.(/1٣é\u0301中👍sStTlLrReEvVdDmM"
dense_texts = st.text(alphabet=_DENSE, max_size=60)
long_pieces = st.builds(
    lambda run, tail: run + tail,
    st.one_of(
        st.text(alphabet="abcdefghijklmnop", min_size=97, max_size=400),
        st.text(alphabet="ab", min_size=97, max_size=300),
        st.text(alphabet="-=*#.!", min_size=97, max_size=300),
        st.text(alphabet="中文日本語", min_size=40, max_size=120),
        st.text(alphabet="\u0301\u0300\u0308", min_size=50, max_size=150),
    ),
    texts,
)
"""Pieces past the array merge's 96 bytes: the heap merge must take HF's merges in order."""


@pytest.fixture(scope="module")
def native(reference: Callable[[str], Tokenizer]) -> Callable[[str], NativeEncoder]:
    """``name -> NativeEncoder`` of that asset, built once per module."""
    return functools.cache(lambda name: NativeEncoder(reference(name)))


def assert_exact(tokenizer: Tokenizer, encoder: NativeEncoder, text: str) -> None:
    got = encoder.encode(text)
    want = tokenizer.encode(text, add_special_tokens=False).ids
    if got is None:  # declined: only where the normalizer changes the text
        assert tokenizer.normalizer is not None
        assert tokenizer.normalizer.normalize_str(text) != text or any(
            t.content in text for t in tokenizer.get_added_tokens_decoder().values()
        )
        return
    assert got.tolist() == want, text


@pytest.mark.parametrize("name", FAMILIES)
@differential(200)
@given(
    text=st.one_of(
        texts, long_texts, dense_texts, case_texts, spliced_texts, long_pieces,
        st.text(max_size=40),
    )
)  # fmt: skip
def test_adversarial_text(
    name: str,
    text: str,
    reference: Callable[[str], Tokenizer],
    native: Callable[[str], NativeEncoder],
) -> None:
    assert_exact(reference(name), native(name), text)


@pytest.mark.parametrize("name", FAMILIES)
def test_agent_transcripts(
    name: str, reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    for seed in (0, 1):
        assert_exact(reference(name), native(name), corpus(seed, 100_000))


@pytest.mark.parametrize("name", ["qwen3", "o200k", "gpt2"])
def test_a_long_repeated_piece(
    name: str, reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    """One piece of 100K bytes (``'a' * 10**7`` is the same merge, only longer)."""
    for text in ("a" * 100_000, "ab" * 50_000 + " x", "=" * 100_000):
        assert_exact(reference(name), native(name), text)


def test_blocks_are_probed_on_first_use(reference: Callable[[str], Tokenizer]) -> None:
    """A fresh class table: each script's block is probed when a text first touches it."""
    table = ClassTable()
    encoder = NativeEncoder(reference("o200k"), classes=table)
    text = "Ἀθῆναι ᚠᛇᚻ 𝔘𝔫𝔦 ꧐꧑꧒ 𞤀𞤢 Ⰰⰰ " * 3
    assert_exact(reference("o200k"), encoder, text)
    assert table.probed.sum() >= 6


def test_threads_share_one_encoder(
    reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    """Encodes on many threads at once (each with its own piece cache) stay exact."""
    encoder, tokenizer = native("llama3"), reference("llama3")
    chunks = [corpus(seed, 20_000) for seed in range(8)]
    want = [tokenizer.encode(c, add_special_tokens=False).ids for c in chunks]
    barrier = threading.Barrier(4)

    def run(i: int) -> list[int]:
        barrier.wait() if i < 4 else None
        ids = encoder.encode(chunks[i % len(chunks)])
        assert ids is not None
        return ids.tolist()

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(run, range(16)))
    assert got == [want[i % len(chunks)] for i in range(16)]


def test_text_nfc_changes_is_declined(
    reference: Callable[[str], Tokenizer], native: Callable[[str], NativeEncoder]
) -> None:
    encoder = native("qwen3")
    before = encoder.stats()["declined"].get("normalizer changes the text", 0)
    assert encoder.encode("cafe\u0301") is None
    assert encoder.encode("<|im_start|>\u0301x") is not None  # NFC leaves a lone mark alone
    assert encoder.stats()["declined"] == {"normalizer changes the text": before + 1}


def test_lone_surrogates_are_refused(native: Callable[[str], NativeEncoder]) -> None:
    with pytest.raises(UnicodeEncodeError):
        native("qwen3").encode("a\ud800b")


@pytest.mark.parametrize("name", ["smollm2", "mistral_v1"])
def test_uncovered_families_are_refused(name: str, reference: Callable[[str], Tokenizer]) -> None:
    with pytest.raises(UnsupportedTokenizer):
        NativeEncoder(reference(name))


@pytest.mark.parametrize("engine", ["native", "reference"])
def test_the_session_says_which_engine_encoded(engine: CpuEncoder, assets: dict[str, Path]) -> None:
    tok = SessionTokenizer.from_file(assets["qwen3"], cpu_encoder=engine, parallel_chunk=256)
    text = corpus(3, 4_000)
    first = tok.encode(text, session="t/s")
    grown = tok.encode(text + " and then some more text", session="t/s")
    reference = tok.reference.tokenizer
    assert first.ids.tolist() == reference.encode(text, add_special_tokens=False).ids
    assert first.parallel_chunks > 1 and grown.route == "append"
    native = engine == "native"
    assert first.native_bytes == (len(text.encode()) if native else 0)
    assert (grown.native_bytes > 0) == native
    assert tok.explain()["parallel_chunks"]["engine"] == engine
