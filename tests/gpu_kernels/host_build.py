"""Build the CUDA kernels for the host: one loop iteration per thread (``HostBackend``).

Every kernel but ``bpe_long`` reads nothing another thread writes, so running the threads one
after another computes what the device computes.  ``bpe_long`` runs with one lane per block
here (its reductions are then trivial; the lanes' split of the work is left to the ``gpu``
tests).  So CI runs the device pipeline itself, kernels and orchestration, without a GPU; the
launch, the copies, NVRTC and parallel lanes are what only a GPU checks.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

_PRELUDE = r"""
#define __device__
#define __forceinline__ inline
#define __global__
#define __shared__ static
#define __syncthreads()
#define __shfl_down_sync(mask, value, offset) (value)
struct Index { long long x; };
static Index blockIdx, blockDim, threadIdx;
"""

_ENTRY = r"""
extern "C" void run_%(kernel)s(long long threads, %(params)s) {
    blockDim.x = 1;
    threadIdx.x = 0;
    for (long long i = 0; i < threads; ++i) {
        blockIdx.x = i;
        %(kernel)s(%(args)s);
    }
}
"""


def kernel_signatures(source: str) -> list[tuple[str, str]]:
    """(name, parameter list) of every ``__global__`` function in ``source``."""
    return re.findall(r"__global__ void (\w+)\((.*?)\)\s*\{", source, re.DOTALL)


_DTYPES = {
    "bool": np.bool_, "unsigned char": np.uint8, "int": np.int32, "unsigned int": np.uint32,
    "long long": np.int64,
}  # fmt: skip
"""The NumPy type of each C type the kernels take."""


class Param(NamedTuple):
    name: str
    dtype: type[np.generic]
    pointer: bool


def parameters(raw: str) -> list[Param]:
    """A kernel's parameters from its C parameter list."""
    params = []
    for text in " ".join(raw.split()).split(","):
        declared, name = text.replace("*", " * ").rsplit(None, 1)
        words = [word for word in declared.split() if word not in ("const", "*")]
        params.append(Param(name, _DTYPES[" ".join(words)], "*" in declared))
    return params


class HostBackend:
    """NumPy arrays and ``kernels.cu`` compiled with g++ (a missing compiler fails the test).

    A launch's arguments must have the parameters' exact types, as CuPy needs: it passes an
    array as a pointer and a NumPy scalar by its own size, whatever the kernel declares (an
    ``np.int64`` for an ``int`` would shift every argument after it on the device)."""

    xp = np

    def __init__(self, source: str, folder: Path) -> None:
        entries = []
        self._params: dict[str, list[Param]] = {}
        for kernel, raw in kernel_signatures(source):
            self._params[kernel] = parameters(raw)
            args = ", ".join(param.name for param in self._params[kernel])
            entries.append(_ENTRY % {"kernel": kernel, "params": raw, "args": args})
        cpp, library = folder / "kernels.cpp", folder / "kernels.so"
        cpp.write_text(_PRELUDE + source + "".join(entries))
        subprocess.run(["g++", "-O2", "-shared", "-fPIC", str(cpp), "-o", str(library)], check=True)
        self._library = ctypes.CDLL(str(library))

    def launch(self, name: str, grid: int, block: int, args: tuple[Any, ...]) -> None:
        converted: list[object] = [ctypes.c_longlong(grid * block)]
        for param, arg in zip(self._params[name], args, strict=True):
            kind = "array" if param.pointer else "scalar"
            assert isinstance(arg, np.ndarray if param.pointer else np.generic), (name, param, arg)
            assert arg.dtype == param.dtype, f"{name}: {kind} {param.name} is {arg.dtype}"
            if param.pointer:
                assert arg.flags.c_contiguous
                converted.append(ctypes.c_void_p(arg.ctypes.data))
            else:
                converted.append(np.ctypeslib.as_ctypes_type(arg.dtype)(arg.item()))
        getattr(self._library, f"run_{name}")(*converted)

    def to_host(self, array: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return array
