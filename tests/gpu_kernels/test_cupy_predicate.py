"""The predicate kernel against the twin: its CUDA source built for the host everywhere
(``host_build``), and the real device kernel where a GPU exists."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_kernels import is_available, unavailable_reason
from gpu_kernels.char_classes import ClassCodes, ClassTable, N, code_points
from gpu_kernels.cupy_predicate import SOURCE, cl100k_starts_on_device
from gpu_kernels.piece_starts import Flags, cl100k_starts
from gpu_kernels.run_scans import run_offsets, whitespace_starts
from loadtest.agent_sessions.session import corpus
from tests.adversarial import long_texts, texts
from tests.gpu_kernels.conftest import differential
from tests.gpu_kernels.host_build import build_for_host

Predicate = Callable[[ClassCodes, ClassCodes, int], Flags]
on_gpu = pytest.mark.skipif(not is_available(), reason=f"no GPU path: {unavailable_reason()}")


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory: pytest.TempPathFactory) -> Predicate:
    """The kernel source built for the host, composed with the run scans like the device's."""
    run = build_for_host(SOURCE, "cl100k_local_starts", tmp_path_factory.mktemp("host"))

    def starts(classes: ClassCodes, folds: ClassCodes, per_piece: int) -> Flags:
        flags = np.zeros(len(classes), dtype=bool)
        if len(classes) == 0:
            return flags
        offsets = np.ascontiguousarray(run_offsets(classes == N, np), dtype=np.int64)
        run(len(classes), classes, folds, offsets, per_piece, len(classes), flags)
        whitespace_starts(classes, flags, np)
        flags[0] = True
        return flags

    return starts


def _device(classes: ClassCodes, folds: ClassCodes, per_piece: int) -> Flags:
    return cl100k_starts_on_device(classes, folds, digits_per_piece=per_piece)


def _check(predicate: Predicate, class_table: ClassTable, text: str) -> None:
    classes, folds = class_table.lookup(code_points(text))
    for per_piece in (1, 3):
        expected = cl100k_starts(classes, folds, digits_per_piece=per_piece)
        assert np.array_equal(predicate(classes, folds, per_piece), expected)


_DENSE = st.text(alphabet="aZſ \t\n\r\u00a0'.(1٣é\u0301中sStTlLrReEvVdDmM", max_size=60)


@differential(300)
@given(text=st.one_of(texts, long_texts, _DENSE))
def test_host_build_of_the_kernel_equals_the_twin(
    text: str, host_kernel: Predicate, class_table: ClassTable
) -> None:
    _check(host_kernel, class_table, text)


def test_host_build_on_a_transcript(host_kernel: Predicate, class_table: ClassTable) -> None:
    _check(host_kernel, class_table, corpus(3, 300_000))


@pytest.mark.gpu
@on_gpu
@differential(300)
@given(text=st.one_of(texts, long_texts, _DENSE))
def test_device_kernel_equals_the_twin(text: str, class_table: ClassTable) -> None:
    _check(_device, class_table, text)


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("chars", [1_000_000, 4_000_000])
def test_device_kernel_on_large_transcripts(chars: int, class_table: ClassTable) -> None:
    _check(_device, class_table, corpus(5, chars))
