"""Chunked encodes against the reference: cut at stable cuts, the chunks' ids are the whole's.

Tiny chunks put a cut every few words, so every adversarial text is cut many times; real
agent transcripts check the same at the sizes the proxy sees, in every proven family.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.byte_level import bytes_to_unicode
from app.sessions import SessionTokenizer
from app.tokenization.boundaries import CutRules
from app.tokenization.chunked import ChunkedEncoder
from app.tokenization.native_route import CpuEncoder
from app.tokenization.reference import OffsetArray, ReferenceEncoder
from app.tokenizer_spec import drops_single_characters, load_spec
from loadtest.agent_sessions import MARKUPS, session_calls
from tests.adversarial import long_texts
from tests.tokenization.conftest import PRE_SPLIT_FAMILIES as FAMILIES


@pytest.fixture(scope="module")
def encoders(assets: dict[str, Path]) -> dict[str, ChunkedEncoder]:
    """A chunked encoder per proven family (its chunk size set by each test)."""
    return {
        name: ChunkedEncoder(
            ReferenceEncoder.from_file(assets[name]), CutRules(load_spec(assets[name])), 0
        )
        for name in FAMILIES
    }


def _sized(encoder: ChunkedEncoder, chunk_bytes: int) -> ChunkedEncoder:
    return ChunkedEncoder(encoder.reference, encoder.rules, chunk_bytes)


def _at_characters(data: bytes, ends: OffsetArray) -> OffsetArray:
    """Each end moved to the end of the character it falls in.  A token that ends inside a
    character (byte-level BPE splits an emoji) has its exact byte end when the reference took
    byte lengths, its character's end when it took offsets (a text its normalizer changes):
    the ends that matter, those at character boundaries, are the same either way."""
    starts = np.flatnonzero((np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80)
    bounds = np.append(starts, len(data)).astype(np.int32)
    return bounds[np.searchsorted(bounds, ends)]


def _removed_bytes(reference: ReferenceEncoder) -> npt.NDArray[np.bool_] | None:
    """Which bytes the pre-tokenizer removes (SmolLM2's ``Split`` after ByteLevel, whose class
    names bytes by their byte-level characters), if any: a 256-entry mask.  Read from the
    pre-tokenizer's own JSON (its pickled state), not the whole tokenizer's: that one is
    megabytes, serialized per example."""
    pre = reference.tokenizer.pre_tokenizer
    steps = json.loads(pre.__getstate__()) if pre is not None else {}
    for step in steps.get("pretokenizers", [steps]):
        if drops_single_characters(step):
            removed = re.compile(step["pattern"]["Regex"])
            mapped = bytes_to_unicode()
            return np.array([removed.fullmatch(mapped[b]) is not None for b in range(256)])
    return None


def _over(removed: npt.NDArray[np.bool_] | None, data: bytes, ends: OffsetArray) -> OffsetArray:
    """Each end moved past the removed bytes that follow it.  Such a byte has no token: a
    whole encode counts it in the end of the token before it, a chunk that starts with it in
    none (the ids are the same; so are the ends everywhere else)."""
    if removed is None:
        return ends
    gone = np.append(removed[np.frombuffer(data, dtype=np.uint8)], False)
    kept = np.flatnonzero(~gone)
    return kept[np.searchsorted(kept, ends)].astype(np.int32)


def _check(encoder: ChunkedEncoder, text: str) -> int:
    """The chunked ids and ends equal the reference's for the whole text, the cuts are what
    ``cuts`` promises; returns the number of chunks."""
    data = text.encode("utf-8")
    encoded = encoder.encode(data)
    whole_ids, whole_ends = encoder.reference.encode(text)
    assert np.array_equal(encoded.ids, whole_ids), text
    removed = _removed_bytes(encoder.reference)
    assert np.array_equal(
        _over(removed, data, _at_characters(data, encoded.ends)),
        _over(removed, data, _at_characters(data, whole_ends)),
    ), text
    cuts = encoder.cuts(data)
    assert encoded.chunks == (len(cuts) - 1 if len(cuts) > 2 else 0)
    chunk = encoder.chunk_bytes
    assert cuts[0] == 0 and cuts[-1] == len(data)
    for before, cut in itertools.pairwise(cuts[:-1]):
        # Each cut is stable in the text that starts at the cut before it: the induction step.
        assert cut - before >= chunk and encoder.rules.is_stable(data[before:], cut - before)
    assert len(cuts) == 2 or cuts[-1] - cuts[-2] >= chunk
    return len(cuts) - 1


@pytest.mark.parametrize("name", FAMILIES)
def test_adversarial_texts_in_tiny_chunks(
    name: str, encoders: dict[str, ChunkedEncoder], reference: Callable[[str], Tokenizer]
) -> None:
    tok = reference(name)
    chunks = []

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(long_texts, st.integers(1, 48))
    def run(text: str, chunk_bytes: int) -> None:
        encoder = _sized(encoders[name], chunk_bytes)
        chunks.append(_check(encoder, text))
        ids = encoder.encode(text.encode("utf-8"))[0]
        assert list(ids) == tok.encode(text, add_special_tokens=False).ids

    run()
    several = sum(n > 3 for n in chunks)
    # Gemma's cuts are rarer by design (added-token edges, and a space after printable ASCII
    # other than ">"): half of the texts cut several times still exercises the induction.
    least = 150 if name == "gemma3" else 200
    assert several > least, f"most texts must be cut several times: {several} of {len(chunks)}"


@pytest.mark.parametrize("name", FAMILIES)
def test_agent_transcripts_in_chunks(name: str, encoders: dict[str, ChunkedEncoder]) -> None:
    """Realistic transcripts (code, logs, tool schemas, multilingual text, special-token text)
    in chunks of 1 KiB and 32 KiB (the default)."""
    text = ""
    for text in session_calls(5, MARKUPS[name], target_chars=200_000, billing_line=True):
        if len(text) >= 150_000:
            break
    assert _check(_sized(encoders[name], 1 << 10), text) > 100
    assert _check(_sized(encoders[name], 32 << 10), text) >= 4


def test_text_without_cuts_stays_one_piece(encoders: dict[str, ChunkedEncoder]) -> None:
    encoder = _sized(encoders["qwen3"], 64)
    blob = "QUJDRA" * 2000  # base64: no space after a letter, no newline
    assert encoder.cuts(blob.encode()) == [0, len(blob)]
    assert _check(encoder, blob) == 1
    # Cuts resume after a stretch without any.
    text = "word " * 100 + blob + " and" * 100
    cuts = encoder.cuts(text.encode())
    assert len(cuts) > 4 and not any(500 < c < 500 + len(blob) for c in cuts)
    _check(encoder, text)


def test_chunk_bytes_zero_is_one_piece_and_negative_is_refused(
    encoders: dict[str, ChunkedEncoder],
) -> None:
    text = "The quick brown fox. " * 500
    assert encoders["gpt2"].cuts(text.encode()) == [0, len(text)]
    with pytest.raises(ValueError, match="chunk_bytes"):
        _sized(encoders["gpt2"], -1)


def test_special_token_text_is_never_cut_inside(encoders: dict[str, ChunkedEncoder]) -> None:
    encoder = _sized(encoders["qwen3"], 8)
    text = "<|im_start|>user\nhi there <|im_end|>\n<|im_start|>assistant\nok\n" * 40
    data = text.encode()
    tokens = [b"<|im_start|>", b"<|im_end|>"]
    spans = [(i, i + len(t)) for t in tokens for i in range(len(data)) if data.startswith(t, i)]
    for cut in encoder.cuts(data)[1:-1]:
        assert not any(start < cut < end for start, end in spans)
    assert _check(encoder, text) > 20


@pytest.mark.parametrize("engine", ["native", "reference"])
@pytest.mark.parametrize("name", ["qwen3", "llama3", "o200k"])
def test_session_cold_starts_and_long_fresh_text_in_chunks(
    name: str, engine: CpuEncoder, assets: dict[str, Path], reference: Callable[[str], Tokenizer]
) -> None:
    """Through the session tokenizer: a cold start and a long appended tool output are both
    encoded in chunks (of the chunk size for the reference, at most two per core for the
    native encoder), and both are exact."""
    tok = SessionTokenizer.from_file(assets[name], parallel_chunk=2048, cpu_encoder=engine)
    ref = reference(name)
    few = engine == "native"
    calls = iter(session_calls(9, MARKUPS[name], target_chars=120_000))
    text = next(text for text in calls if len(text) > 60_000)
    enc = tok.encode(text, session="c/1")
    assert enc.route == "full" and list(enc.ids) == ref.encode(text).ids
    assert enc.parallel_chunks >= 2 if few else enc.parallel_chunks > 20
    text += "<tool_response>\n" + "Traceback (most recent call last):\n  x = 1\n" * 500
    enc = tok.encode(text, session="c/1")
    assert enc.route == "append" and enc.encoded_bytes > 20_000
    assert list(enc.ids) == ref.encode(text, add_special_tokens=False).ids
    assert enc.parallel_chunks >= 2 if few else enc.parallel_chunks > 8
    enc = tok.encode(text + " and a short append.", session="c/1")
    assert enc.route == "append" and enc.parallel_chunks == 0
    stats = tok.explain()["parallel_chunks"]
    assert (stats["chunk_bytes"], stats["texts"], stats["engine"]) == (2048, 2, engine)
    assert stats["chunks"] >= 4 if few else stats["chunks"] > 30
