"""The session tokenizer's route "gpu": cold starts from the device pipeline (built for the
host everywhere, the real GPU where there is one), repair from the state it leaves, and the CPU
reference wherever the GPU declines or fails."""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from app.sessions import SessionTokenizer
from app.sessions.tokenizer import store_key
from app.tokenization.gpu_route import GpuColdStarts, gpu_cold_starts
from app.tokenization.reference import IdArray, ReferenceEncoder
from gpu_kernels import is_available
from gpu_kernels.backend import Backend
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.device_encoder import LONGEST_PIECE, DeviceEncoder
from loadtest.agent_sessions.session import corpus
from tests.gpu_kernels.conftest import on_gpu

NAMES = ["qwen3", "llama3", "gpt2"]


def _transcript(chars: int) -> str:
    """A generated transcript in NFC (the generator plants decomposed marks, which Qwen3's
    normalizer would compose: such text takes the CPU, see the test below)."""
    return unicodedata.normalize("NFC", corpus(2, chars))


def _session(
    assets: dict[str, Path], name: str, encoder: DeviceEncoder, min_bytes: int
) -> SessionTokenizer:
    return SessionTokenizer.from_file(assets[name], gpu=GpuColdStarts(encoder, min_bytes))


def _check_session(tok: SessionTokenizer, reference: Tokenizer, text: str) -> None:
    """A cold start goes to the GPU and leaves the reference's ends; the next calls repair."""
    first = tok.encode(text, session="t/s")
    assert first.route == "gpu"
    assert first.ids.tolist() == reference.encode(text, add_special_tokens=False).ids
    state = tok.store.get(store_key("t/s"))
    assert state is not None
    assert np.array_equal(state.ends, ReferenceEncoder(reference).encode(text)[1])
    for grown in (text + " and then 12345 more\n", text[: len(text) // 2] + "!" + text):
        enc = tok.encode(grown, session="t/s")
        assert enc.route in ("append", "edit")
        assert enc.ids.tolist() == reference.encode(grown, add_special_tokens=False).ids


@pytest.mark.parametrize("name", NAMES)
def test_cold_starts_on_the_host_build(
    name: str,
    assets: dict[str, Path],
    reference: Callable[[str], Tokenizer],
    class_table: ClassTable,
    host_backend: Backend,
) -> None:
    encoder = DeviceEncoder(reference(name), classes=class_table, backend=host_backend)
    tok = _session(assets, name, encoder, 4096)
    _check_session(tok, reference(name), _transcript(60_000))
    small = tok.encode("a short text", session="t/other")
    assert small.route == "full"


def test_text_the_normalizer_changes_goes_to_the_cpu(
    assets: dict[str, Path],
    reference: Callable[[str], Tokenizer],
    class_table: ClassTable,
    host_backend: Backend,
) -> None:
    encoder = DeviceEncoder(reference("qwen3"), classes=class_table, backend=host_backend)
    tok = _session(assets, "qwen3", encoder, 1)
    text = "cafe\u0301 " * 100
    enc = tok.encode(text, session="t/s")
    assert enc.route == "full"
    assert enc.ids.tolist() == reference("qwen3").encode(text, add_special_tokens=False).ids


def test_an_overlong_piece_goes_to_the_cpu(
    assets: dict[str, Path],
    reference: Callable[[str], Tokenizer],
    class_table: ClassTable,
    host_backend: Backend,
) -> None:
    """One piece of LONGEST_PIECE + 1 bytes (a run of one letter) would hold the device for
    thousands of merge steps: the route declines it."""
    encoder = DeviceEncoder(reference("llama3"), classes=class_table, backend=host_backend)
    tok = _session(assets, "llama3", encoder, 1)
    for text in ("a" * LONGEST_PIECE + " b", "a" * (LONGEST_PIECE + 1) + " b"):
        enc = tok.encode(text)
        assert enc.route == ("gpu" if len(text) == LONGEST_PIECE + 2 else "full")
        assert enc.ids.tolist() == reference("llama3").encode(text, add_special_tokens=False).ids


class _Failing:
    def encode_unchanged(self, text: str, utf8: bytes | None = None) -> IdArray | None:
        raise RuntimeError("cudaErrorMemoryAllocation")


def test_a_gpu_failure_falls_back_to_the_cpu(
    assets: dict[str, Path], reference: Callable[[str], Tokenizer]
) -> None:
    gpu = GpuColdStarts(_Failing(), 1)
    tok = SessionTokenizer.from_file(assets["llama3"], gpu=gpu)
    text = corpus(1, 5000)
    enc = tok.encode(text, session="t/s")
    assert enc.route == "full" and gpu.failures == 1
    assert enc.ids.tolist() == reference("llama3").encode(text, add_special_tokens=False).ids


def test_the_route_is_on_exactly_where_a_gpu_is(
    reference: Callable[[str], Tokenizer], caplog: pytest.LogCaptureFixture
) -> None:
    assert gpu_cold_starts(reference("llama3"), 0) is None
    with caplog.at_level(logging.INFO, logger="app.tokenization.gpu_route"):
        route = gpu_cold_starts(reference("llama3"), 65536)
    assert (route is not None) is is_available()
    assert ("GPU cold starts on" if is_available() else "GPU cold starts off") in caplog.text
    if is_available():
        assert gpu_cold_starts(reference("o200k"), 65536) is None  # not a covered family


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("name", NAMES)
def test_cold_starts_on_the_gpu(
    name: str,
    assets: dict[str, Path],
    reference: Callable[[str], Tokenizer],
    class_table: ClassTable,
) -> None:
    tok = _session(assets, name, DeviceEncoder(reference(name), classes=class_table), 64 << 10)
    _check_session(tok, reference(name), _transcript(1_000_000))
