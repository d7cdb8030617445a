"""The predicate kernels against the twin's predicates, added-token sentinels included: built
for the host everywhere, on the device where a GPU exists."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given

from gpu_kernels import TwinEncoder
from gpu_kernels.backend import Backend, CupyBackend
from gpu_kernels.cupy_predicate import starts_on_device
from gpu_kernels.payload import decode, marked
from gpu_kernels.piece_starts import PREDICATES, exact_folds
from loadtest.agent_sessions.session import corpus
from tests.gpu_kernels.conftest import FAMILIES, adversarial, differential, on_gpu
from tests.gpu_kernels.host_build import HostBackend

NAMES = ["qwen3", "llama3", "gpt2", "o200k"]


def _check(backend: Backend, twin: TwinEncoder, family: str, text: str) -> None:
    points, _ = decode(marked(twin.plan.split.payload(text)))
    codes = twin.plan.classes.lookup(points)
    expected = PREDICATES[family](codes, points)
    if family == "gpt2":
        codes = codes._replace(folds=exact_folds(points, codes.folds))
    assert np.array_equal(starts_on_device(family, codes, points, backend), expected)


@pytest.mark.parametrize("name", NAMES)
@differential(200)
@given(text=adversarial)
def test_host_build_equals_the_twin(
    name: str, text: str, host_backend: HostBackend, twin: Callable[[str], TwinEncoder]
) -> None:
    _check(host_backend, twin(name), FAMILIES[name], text)


@pytest.mark.parametrize("name", NAMES)
def test_host_build_on_a_transcript(
    name: str, host_backend: HostBackend, twin: Callable[[str], TwinEncoder]
) -> None:
    _check(host_backend, twin(name), FAMILIES[name], corpus(3, 300_000))


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("name", NAMES)
@differential(100)
@given(text=adversarial)
def test_device_kernels_equal_the_twin(
    name: str, text: str, twin: Callable[[str], TwinEncoder]
) -> None:
    _check(CupyBackend(), twin(name), FAMILIES[name], text)


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("name", NAMES)
def test_device_kernels_on_a_large_transcript(
    name: str, twin: Callable[[str], TwinEncoder]
) -> None:
    _check(CupyBackend(), twin(name), FAMILIES[name], corpus(5, 4_000_000))
