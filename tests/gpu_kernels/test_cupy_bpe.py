"""The BPE tier kernels (thread, warp, block) against the twin's merge rounds: built for the
host everywhere, on the device where a GPU exists."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_kernels import TwinEncoder
from gpu_kernels.backend import Backend, CupyBackend
from gpu_kernels.byte_bpe import MergeTable
from gpu_kernels.cuda_source import SHORT_MAX, WARP_MAX
from gpu_kernels.cupy_bpe import merge_on_device
from loadtest.agent_sessions.session import corpus
from tests.gpu_kernels.conftest import differential, on_gpu
from tests.gpu_kernels.test_byte_bpe import pieces

NAMES = ["qwen3", "llama3", "gpt2"]

# Pieces past the thread tier: warp-tier and block-tier lengths, repeats (one rank many times)
# and mixed text.
long_pieces = st.one_of(
    st.text(alphabet="ab =\n", min_size=SHORT_MAX + 1, max_size=WARP_MAX + 300).map(str.encode),
    st.sampled_from([" " * 2000, "=" * 1500, "ab" * 700, "\n" * 40]).map(str.encode),
    st.text(min_size=SHORT_MAX // 2, max_size=200).map(str.encode),
)
batches = st.lists(st.one_of(pieces, long_pieces), min_size=1, max_size=12)


def _check(backend: Backend, table: MergeTable, batch: list[bytes]) -> None:
    expected = [ids.tolist() for ids in table.merge(batch)]
    assert [ids.tolist() for ids in merge_on_device(table, batch, backend)] == expected


def _transcript_pieces(twin: TwinEncoder, chars: int) -> list[bytes]:
    """The distinct pieces of a generated transcript, as the predicate cuts them."""
    data, begin, end, _ = twin.pieces(corpus(9, chars))
    raw = data.tobytes()
    plain = data[begin] != 0xFF
    spans = zip(begin[plain].tolist(), end[plain].tolist(), strict=True)
    return sorted({raw[b:e] for b, e in spans})


@pytest.mark.parametrize("name", NAMES)
@differential(100)
@given(batch=batches)
def test_host_build_equals_merge_rounds(
    name: str, batch: list[bytes], host_backend: Backend, merge_table: Callable[[str], MergeTable]
) -> None:
    _check(host_backend, merge_table(name), batch)


@pytest.mark.parametrize("name", NAMES)
def test_host_build_on_transcript_pieces(
    name: str,
    host_backend: Backend,
    merge_table: Callable[[str], MergeTable],
    twin: Callable[[str], TwinEncoder],
) -> None:
    _check(host_backend, merge_table(name), _transcript_pieces(twin(name), 100_000))


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("name", NAMES)
@differential(100)
@given(batch=batches)
def test_device_tiers_equal_merge_rounds(
    name: str, batch: list[bytes], merge_table: Callable[[str], MergeTable]
) -> None:
    _check(CupyBackend(), merge_table(name), batch)


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("name", NAMES)
def test_device_tiers_on_transcript_pieces(
    name: str, merge_table: Callable[[str], MergeTable], twin: Callable[[str], TwinEncoder]
) -> None:
    _check(CupyBackend(), merge_table(name), _transcript_pieces(twin(name), 1_000_000))
