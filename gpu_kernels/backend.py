"""Where the device stages run: CuPy on a GPU, or (in tests) NumPy with the kernels built for
the host.  The stages are written once against this: an array module and a kernel launcher."""

from __future__ import annotations

import importlib
from typing import Any, Protocol

import numpy.typing as npt

from gpu_kernels.cuda_source import module

THREADS = 256


class Backend(Protocol):
    xp: Any
    """The array module (``cupy``, or ``numpy`` for a host build)."""

    def launch(self, name: str, grid: int, block: int, args: tuple[Any, ...]) -> None:
        """Run kernel ``name`` of ``kernels.cu`` on ``grid`` blocks of ``block`` threads."""

    def to_host(self, array: Any) -> npt.NDArray[Any]: ...


def per_item(backend: Backend, name: str, items: int, *args: Any) -> None:
    """Run kernel ``name`` with one thread per item (none for no items: CUDA refuses 0 blocks)."""
    if items:
        backend.launch(name, (items + THREADS - 1) // THREADS, THREADS, args)


class CupyBackend:
    """The GPU: CuPy arrays and the NVRTC-compiled module (CuPy imported here, not before)."""

    def __init__(self) -> None:
        self.xp: Any = importlib.import_module("cupy")

    def launch(self, name: str, grid: int, block: int, args: tuple[Any, ...]) -> None:
        module().get_function(name)((grid,), (block,), args)

    def to_host(self, array: Any) -> npt.NDArray[Any]:
        host: npt.NDArray[Any] = self.xp.asnumpy(array)
        return host


def default_backend(backend: Backend | None) -> Backend:
    return backend if backend is not None else CupyBackend()
