"""The host build checks launches as CuPy needs them: every argument of its parameter's type."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu_kernels.host_build import HostBackend, Param, parameters


def test_parameters_read_c_declarations() -> None:
    raw = "const unsigned char* bytes, const long long\n n, int* out, const bool* flags, int k"
    assert parameters(raw) == [
        Param("bytes", np.uint8, True), Param("n", np.int64, False),
        Param("out", np.int32, True), Param("flags", np.bool_, True), Param("k", np.int32, False),
    ]  # fmt: skip


def _gather_args(size: type[np.generic]) -> tuple[object, ...]:
    tokens = np.arange(4, dtype=np.int32)
    begin = np.array([0, 2], dtype=np.int64)
    counts = np.array([2, 2], dtype=np.int32)
    out_at = np.array([0, 2], dtype=np.int64)
    return tokens, begin, counts, out_at, size(2), np.zeros(4, dtype=np.int32)


def test_exact_types_launch(host_backend: HostBackend) -> None:
    args = _gather_args(np.int64)
    host_backend.launch("gather_ids", 1, 2, args)
    out = args[-1]
    assert isinstance(out, np.ndarray)
    assert out.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("at", "value", "message"),
    [
        (4, np.int32(2), "scalar pieces is int32"),
        (0, np.arange(4, dtype=np.int64), "array tokens is int64"),
        (4, 2, "pieces"),  # a Python int: CuPy would pick its size, not the kernel
    ],
)
def test_a_mistyped_argument_is_refused(
    host_backend: HostBackend, at: int, value: object, message: str
) -> None:
    args = list(_gather_args(np.int64))
    args[at] = value
    with pytest.raises(AssertionError, match=message):
        host_backend.launch("gather_ids", 1, 2, tuple(args))
