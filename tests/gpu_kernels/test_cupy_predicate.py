"""The predicate kernel against the twin: its CUDA source built for the host everywhere
(``host_build``), and the real device kernel where a GPU exists."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_kernels import is_available, unavailable_reason
from gpu_kernels.char_classes import ClassCodes, ClassTable, code_points
from gpu_kernels.cupy_predicate import cl100k_starts_on_device
from gpu_kernels.piece_starts import Flags, cl100k_starts
from loadtest.agent_sessions.session import corpus
from tests.adversarial import long_texts, texts
from tests.gpu_kernels.conftest import HostPredicate, differential

on_gpu = pytest.mark.skipif(not is_available(), reason=f"no GPU path: {unavailable_reason()}")


def _device(classes: ClassCodes, folds: ClassCodes, per_piece: int) -> Flags:
    return cl100k_starts_on_device(classes, folds, digits_per_piece=per_piece)


def _check(predicate: HostPredicate, class_table: ClassTable, text: str) -> None:
    classes, folds = class_table.lookup(code_points(text))
    for per_piece in (1, 3):
        expected = cl100k_starts(classes, folds, digits_per_piece=per_piece)
        assert np.array_equal(predicate(classes, folds, per_piece), expected)


_DENSE = st.text(alphabet="aZſ \t\n\r\u00a0'.(1٣é\u0301中sStTlLrReEvVdDmM", max_size=60)


@differential(300)
@given(text=st.one_of(texts, long_texts, _DENSE))
def test_host_build_of_the_kernel_equals_the_twin(
    text: str, host_predicate: HostPredicate, class_table: ClassTable
) -> None:
    _check(host_predicate, class_table, text)


def test_host_build_on_a_transcript(host_predicate: HostPredicate, class_table: ClassTable) -> None:
    _check(host_predicate, class_table, corpus(3, 300_000))


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
