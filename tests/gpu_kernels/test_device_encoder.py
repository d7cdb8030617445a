"""The device pipeline end to end equals the reference: every stage's kernel and the
orchestration, built for the host everywhere, and on the device where a GPU exists."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
from hypothesis import given
from tokenizers import Tokenizer

from gpu_kernels import UnsupportedTokenizer
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.device_encoder import DeviceEncoder
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
    "text", ["", "<|im_start|>", "<|im_start|><|im_start|>", " ", "a", "<|endoftext|> \n"]
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


@pytest.mark.parametrize("name", ["o200k", "deepseek_v3", "smollm2", "mistral_v1"])
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
