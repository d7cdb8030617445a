"""The GPU path end to end: the twin's pipeline with the kernels' stages equals the reference.

Everywhere with the kernels built for the host; with the device kernels where a GPU exists.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from gpu_kernels import TwinEncoder, UnsupportedTokenizer, is_available, unavailable_reason
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.device_encoder import device_encoder
from gpu_kernels.twin import MergeStage
from loadtest.agent_sessions.session import corpus
from tests.adversarial import long_texts, texts
from tests.gpu_kernels.conftest import HostPredicate, differential
from tests.gpu_kernels.test_twin import assert_exact

NAMES = {"qwen3": 1, "llama3": 3}  # digits per piece
on_gpu = pytest.mark.skipif(not is_available(), reason=f"no GPU path: {unavailable_reason()}")


@pytest.fixture(scope="module")
def host_encoder(
    reference: Callable[[str], Tokenizer],
    class_table: ClassTable,
    host_predicate: HostPredicate,
    host_merge: MergeStage,
) -> Callable[[str], TwinEncoder]:
    encoders = {
        name: TwinEncoder(
            reference(name),
            classes=class_table,
            cache_bytes=0,  # every distinct piece goes through the kernel
            predicate=lambda c, f, _, n=per_piece: host_predicate(c, f, n),
            merge=host_merge,
        )
        for name, per_piece in NAMES.items()
    }
    return encoders.__getitem__


@pytest.mark.parametrize("name", NAMES)
@differential(150)
@given(text=st.one_of(texts, long_texts))
def test_host_built_kernels_end_to_end(
    name: str,
    text: str,
    reference: Callable[[str], Tokenizer],
    host_encoder: Callable[[str], TwinEncoder],
) -> None:
    assert_exact(reference(name), host_encoder(name), text)


@pytest.mark.parametrize("name", NAMES)
def test_host_built_kernels_on_a_transcript(
    name: str, reference: Callable[[str], Tokenizer], host_encoder: Callable[[str], TwinEncoder]
) -> None:
    assert_exact(reference(name), host_encoder(name), corpus(4, 100_000))


def test_device_encoder_refuses_other_families(reference: Callable[[str], Tokenizer]) -> None:
    with pytest.raises(UnsupportedTokenizer):
        device_encoder(reference("gpt2"))


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("chars", [100_000, 1_000_000])
def test_device_encoder_end_to_end(
    name: str, chars: int, reference: Callable[[str], Tokenizer], class_table: ClassTable
) -> None:
    encoder = device_encoder(reference(name), classes=class_table, cache_bytes=0)
    assert_exact(reference(name), encoder, corpus(6, chars))
