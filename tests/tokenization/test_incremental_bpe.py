"""Incremental BPE equals HF tokenizers' BPE model on the real vocabularies.

Compared without pre-split (the whole byte string) and per piece of each family's own
pre-tokenizer, on hypothesis text and bytes, on real text (this repository's README and sources)
and on pathological input; fed in arbitrary chunks, eager ids are never retracted, and a state
dumped and restored at any point finishes with the same ids.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.tokenization.incremental_bpe import IncrementalBPE, VocabularyError
from app.tokenization.incremental_bpe.tables import NAMES, load_tables
from loadtest.bpe_reference import pre_tokenizer_pieces, reference_bpe
from tests.adversarial import texts

FAMILIES = ("gpt2", "qwen3", "cl100k", "o200k", "deepseek_v3", "smollm2")
REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_TEXT = [
    (REPO_ROOT / name).read_bytes()
    for name in ("README.md", "app/sessions/tokenizer.py", "app/tokenizer_spec.py")
]
family = st.sampled_from(FAMILIES)
cheap = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="session")
def engine(incremental_bpe: Callable[[str], IncrementalBPE]) -> Callable[[str], IncrementalBPE]:
    return incremental_bpe


@pytest.fixture(scope="session")
def bpe(assets: dict[str, Path]) -> Callable[[str], Callable[[bytes], list[int]]]:
    return functools.cache(lambda name: reference_bpe(assets[name]))


@pytest.fixture(scope="session")
def split(assets: dict[str, Path]) -> Callable[[str], Callable[[str], list[bytes]]]:
    return functools.cache(lambda name: pre_tokenizer_pieces(assets[name]))


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def check_eager(engine: IncrementalBPE, data: bytes, cuts: list[int], expected: list[int]) -> None:
    """Fed in chunks, the final ids grow as a prefix of the expected ids and end equal to them."""
    state = engine.start()
    final: list[int] = []
    for chunk in chunked(data, cuts):
        final += state.feed(chunk)
        assert final == expected[: len(final)]
    assert final + state.pending() == expected == state.ids()


@pytest.mark.parametrize("name", FAMILIES)
def test_real_text_whole_and_eager(name: str, engine: Callable[[str], IncrementalBPE], bpe):
    for data in REAL_TEXT:
        expected = bpe(name)(data)
        assert engine(name).encode(data) == expected
        check_eager(engine(name), data, list(range(0, len(data), 97)), expected)


@pytest.mark.parametrize("name", FAMILIES)
def test_real_text_per_piece(name: str, engine, bpe, split):
    text = b"\n".join(REAL_TEXT).decode("utf-8")
    pieces = split(name)(text)
    assert len(pieces) > 1000
    assert [engine(name).encode(p) for p in pieces] == [bpe(name)(p) for p in pieces]


@cheap
@given(name=family, text=texts, cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_hypothesis_text(name: str, text: str, cuts: list[int], engine, bpe, split):
    data = text.encode("utf-8")
    check_eager(engine(name), data, cuts, bpe(name)(data))
    pieces = split(name)(text)
    assert [engine(name).encode(p) for p in pieces] == [bpe(name)(p) for p in pieces]


@cheap
@given(
    name=family,
    data=st.binary(max_size=300),
    cuts=st.lists(st.integers(0, 1000), max_size=8),
)
def test_hypothesis_bytes(name: str, data: bytes, cuts: list[int], engine, bpe):
    expected = bpe(name)(data)
    assert engine(name).encode(data) == expected
    check_eager(engine(name), data, cuts, expected)


@cheap
@given(
    name=family,
    unit=st.binary(min_size=1, max_size=4) | st.sampled_from([b"a", b" ", b"=", b"ab", b"\n"]),
    count=st.integers(1, 3000),
    cuts=st.lists(st.integers(0, 20_000), max_size=4),
)
def test_repetitions(name: str, unit: bytes, count: int, cuts: list[int], engine, bpe):
    """Long runs of one short unit: the inputs where the last token stays undecided longest."""
    data = unit * count
    check_eager(engine(name), data, cuts, bpe(name)(data))


@pytest.mark.parametrize("name", FAMILIES)
def test_long_single_byte_runs(name: str, engine, bpe):
    for byte in b"a \n=0-":
        data = bytes([byte]) * 20_000
        check_eager(engine(name), data, [1, 17, 4096, 10_001], bpe(name)(data))


@cheap
@given(name=family, text=texts, cut=st.integers(0, 10_000), eager=st.booleans())
def test_dump_restore(name: str, text: str, cut: int, eager: bool, engine, bpe):
    data = text.encode("utf-8")
    cut %= len(data) + 1
    first = engine(name).start(eager=eager)
    head = first.feed(data[:cut])
    resumed = engine(name).restore(first.dump(), eager=eager)
    assert resumed.consumed == first.consumed
    assert head + resumed.feed(data[cut:]) + resumed.pending() == bpe(name)(data)


@pytest.mark.parametrize("eager", [True, False])
def test_dump_restore_chained_over_real_text(eager: bool, engine, bpe):
    """A state carried through a dump and a restore every 997 bytes of real text."""
    data = b"\n".join(REAL_TEXT)
    state = engine("qwen3").start(eager=eager)
    final: list[int] = []
    for offset in range(0, len(data), 997):
        final += state.feed(data[offset : offset + 997])
        blob = state.dump()
        assert len(blob) < 4096 or not eager
        state = engine("qwen3").restore(blob, eager=eager)
    assert final + state.pending() == bpe("qwen3")(data)


def test_restore_rejects_garbage(engine):
    with pytest.raises(ValueError, match="not a dump"):
        engine("gpt2").restore(b"\x00" * 64)
    blob = engine("gpt2").start().dump()
    with pytest.raises(ValueError, match="not a dump"):
        engine("gpt2").restore(blob[:-1])


def test_eager_output_keeps_up(engine):
    """Eager output lags the input by a bounded span on prose (here: at most 64 bytes)."""
    state = engine("qwen3").start()
    for data in REAL_TEXT:
        for offset in range(0, len(data), 1000):
            state.feed(data[offset : offset + 1000])
            assert state.consumed - state.final_bytes <= 64


def test_cache_round_trip(assets: dict[str, Path], tmp_path: Path):
    _, built = load_tables(assets["gpt2"], tmp_path)
    assert len(list(tmp_path.iterdir())) == 1
    _, cached = load_tables(assets["gpt2"], tmp_path)
    for name in (*NAMES, "dropped"):
        np.testing.assert_array_equal(built[name], cached[name])


def test_llama3_is_reported_improper(assets: dict[str, Path]):
    """Llama 3's merges rank some tokens before their parts (``.:.:`` before ``.:.``): HF fires
    such a merge the moment its part appears, outside rank order, which no proper vocabulary
    reproduces.  The file is refused with the offending token, never encoded wrongly."""
    with pytest.raises(VocabularyError, match="cannot be made proper: token"):
        IncrementalBPE.from_file(assets["llama3"], use_cache=False)
