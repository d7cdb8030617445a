"""The device pipeline end to end equals the reference: every stage's kernel and the
orchestration, built for the host everywhere, and on the device where a GPU exists."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from gpu_kernels import TwinEncoder, UnsupportedTokenizer
from gpu_kernels import device_encoder as device_module
from gpu_kernels import twin as twin_module
from gpu_kernels.char_classes import NFC_UNKNOWN, ClassTable
from gpu_kernels.device_encoder import DeviceEncoder
from gpu_kernels.payload import decode
from loadtest.agent_sessions.session import corpus
from tests.gpu_kernels.conftest import FAMILIES, adversarial, differential, on_gpu
from tests.gpu_kernels.host_build import HostBackend
from tests.gpu_kernels.test_twin import assert_exact

Encoders = Callable[[str], DeviceEncoder]


@pytest.fixture(scope="module")
def host_encoder(
    reference: Callable[[str], Tokenizer], class_table: ClassTable, host_backend: HostBackend
) -> Encoders:
    return functools.cache(
        lambda name: DeviceEncoder(reference(name), classes=class_table, backend=host_backend)
    )


@pytest.fixture(scope="module")
def gpu_encoder(reference: Callable[[str], Tokenizer], class_table: ClassTable) -> Encoders:
    return functools.cache(lambda name: DeviceEncoder(reference(name), classes=class_table))


@pytest.mark.parametrize("name", FAMILIES)
@differential(150)
@given(text=adversarial)
def test_host_build_end_to_end(
    name: str, text: str, reference: Callable[[str], Tokenizer], host_encoder: Encoders
) -> None:
    assert_exact(reference(name), host_encoder(name), text)


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize(
    "text",
    [
        *("", "<|im_start|>", "<|im_start|><|im_start|>", " ", "a", "<|endoftext|> \n"),
        # normal forms: composed by NFC, a mark opening a stretch, Hangul jamo, a character
        # newer than Python's tables (Nag Mundari, Unicode 15: a combining mark)
        *("e\u0301", "<|im_start|>\u0301x", "\u1100\u1161\u11a8", "a\U0001e4ec\u0301b"),
    ],
)
def test_host_build_edges(
    name: str, text: str, reference: Callable[[str], Tokenizer], host_encoder: Encoders
) -> None:
    assert_exact(reference(name), host_encoder(name), text)


@pytest.mark.parametrize("name", FAMILIES)
def test_host_build_on_a_transcript(
    name: str, reference: Callable[[str], Tokenizer], host_encoder: Encoders
) -> None:
    assert_exact(reference(name), host_encoder(name), corpus(4, 200_000))


@pytest.mark.parametrize(
    ("text", "unchanged"),
    [("plain é text", True), ("e\u0301", False), ("a\U0001e4ec\u0301", True), ("x" * 99, True)],
)
def test_unchanged_only_where_the_normalizer_keeps_the_text(
    text: str, unchanged: bool, reference: Callable[[str], Tokenizer], host_encoder: Encoders
) -> None:
    """Qwen3 normalizes to NFC: ``encode_unchanged`` declines exactly the texts it changes."""
    ids = host_encoder("qwen3").encode_unchanged(text)
    assert (ids is not None) is unchanged
    if ids is not None:
        assert ids.tolist() == reference("qwen3").encode(text, add_special_tokens=False).ids


# Characters NFC composes, reorders or replaces, and the starters they join, with added tokens.
_NFC_TRAPS = (
    "eEaAoOn <>=\u0301\u0300\u0308\u0323\u0338\u1100\u1161\u11a8\uac00\u0b47\u0b3e\u212b\u00c5"
)
nfc_texts = st.lists(
    st.one_of(st.text(alphabet=_NFC_TRAPS, max_size=12), st.sampled_from(["<|im_start|>", "x"])),
    max_size=8,
).map("".join)


@differential(300)
@given(text=nfc_texts)
def test_nfc_skipped_only_where_it_holds(
    text: str, reference: Callable[[str], Tokenizer], host_encoder: Encoders
) -> None:
    """Qwen3 normalizes to NFC; the stages skip it only where their check proves it moot."""
    encoder = host_encoder("qwen3")
    expected = reference("qwen3").encode(text, add_special_tokens=False).ids
    assert encoder.encode(text).tolist() == expected
    unchanged = reference("qwen3").normalizer.normalize_str(text) == text
    assert (encoder.encode_unchanged(text) is not None) is unchanged or "<|im_start|>" in text


def test_a_character_unknown_to_python_redoes_the_normalization(
    reference: Callable[[str], Tokenizer],
    host_backend: HostBackend,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Skipping NFC on Python's word holds only for characters Python's tables have: here they
    call every window normalized and lack U+0301, so the stages must normalize after all."""
    for module in (twin_module, device_module):
        monkeypatch.setattr(module, "windows_normalized", lambda *_: True)
    classes = ClassTable()
    text = "cafe\u0301 <|im_start|>e\u0301"
    classes.nfc_codes(decode(np.frombuffer(text.encode(), dtype=np.uint8))[0])
    classes.nfc[0x301] = NFC_UNKNOWN
    expected = reference("qwen3").encode(text, add_special_tokens=False).ids
    twin = TwinEncoder(reference("qwen3"), classes=classes)
    device = DeviceEncoder(reference("qwen3"), classes=classes, backend=host_backend)
    assert twin.encode(text).tolist() == expected
    assert device.encode(text).tolist() == expected
    assert device.encode_unchanged(text) is None


@pytest.mark.parametrize("name", ["smollm2", "mistral_v1"])
def test_other_families_are_refused(
    name: str, reference: Callable[[str], Tokenizer], host_backend: HostBackend
) -> None:
    with pytest.raises(UnsupportedTokenizer):
        DeviceEncoder(reference(name), backend=host_backend)


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("name", FAMILIES)
@differential(100)
@given(text=adversarial)
def test_device_end_to_end(
    name: str, text: str, reference: Callable[[str], Tokenizer], gpu_encoder: Encoders
) -> None:
    assert_exact(reference(name), gpu_encoder(name), text)


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("chars", [1_000_000, 4_000_000])
def test_device_on_large_transcripts(
    name: str, chars: int, reference: Callable[[str], Tokenizer], gpu_encoder: Encoders
) -> None:
    assert_exact(reference(name), gpu_encoder(name), corpus(6, chars))
