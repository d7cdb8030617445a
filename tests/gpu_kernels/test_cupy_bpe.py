"""The per-piece BPE kernel against the twin's merge rounds: host build everywhere, device
kernel where a GPU exists."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_kernels import TwinEncoder, is_available, unavailable_reason
from gpu_kernels.byte_bpe import MergeTable
from gpu_kernels.cupy_bpe import merge_on_device
from gpu_kernels.twin import MergeStage
from loadtest.agent_sessions.session import corpus
from tests.gpu_kernels.conftest import differential
from tests.gpu_kernels.test_byte_bpe import pieces

on_gpu = pytest.mark.skipif(not is_available(), reason=f"no GPU path: {unavailable_reason()}")
NAMES = ["qwen3", "llama3"]


def _check(merge: MergeStage, table: MergeTable, batch: list[bytes]) -> None:
    expected = [ids.tolist() for ids in table.merge(batch)]
    assert [ids.tolist() for ids in merge(table, batch)] == expected


@pytest.mark.parametrize("name", NAMES)
@differential(150)
@given(batch=st.lists(pieces, min_size=1, max_size=16))
def test_host_build_equals_merge_rounds(
    name: str, batch: list[bytes], host_merge: MergeStage, merge_table: Callable[[str], MergeTable]
) -> None:
    _check(host_merge, merge_table(name), batch)


def _transcript_pieces(twin: TwinEncoder, chars: int) -> list[bytes]:
    """The distinct pieces of a generated transcript, as the predicate cuts them."""
    text = corpus(9, chars)
    _, begin, end = twin.pieces(text)
    return sorted({text[b:e].encode() for b, e in zip(begin.tolist(), end.tolist(), strict=True)})


@pytest.mark.parametrize("name", NAMES)
def test_host_build_on_transcript_pieces(
    name: str,
    host_merge: MergeStage,
    merge_table: Callable[[str], MergeTable],
    twin: Callable[[str], TwinEncoder],
) -> None:
    _check(host_merge, merge_table(name), _transcript_pieces(twin(name), 100_000))


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("name", NAMES)
@differential(150)
@given(batch=st.lists(pieces, min_size=1, max_size=16))
def test_device_kernel_equals_merge_rounds(
    name: str, batch: list[bytes], merge_table: Callable[[str], MergeTable]
) -> None:
    _check(merge_on_device, merge_table(name), batch)


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("name", NAMES)
def test_device_kernel_on_transcript_pieces(
    name: str, merge_table: Callable[[str], MergeTable], twin: Callable[[str], TwinEncoder]
) -> None:
    _check(merge_on_device, merge_table(name), _transcript_pieces(twin(name), 1_000_000))
