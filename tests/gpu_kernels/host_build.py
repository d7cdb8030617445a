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
from typing import Any

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


class HostBackend:
    """NumPy arrays and ``kernels.cu`` compiled with g++ (a missing compiler fails the test)."""

    xp = np

    def __init__(self, source: str, folder: Path) -> None:
        kernels = re.findall(r"__global__ void (\w+)\((.*?)\)\s*\{", source, re.DOTALL)
        entries = []
        self._int_params: dict[str, list[bool]] = {}
        for kernel, raw in kernels:
            params = " ".join(raw.split())
            names = [p.replace("*", " ").split()[-1] for p in params.split(",")]
            args = ", ".join(names)
            entries.append(_ENTRY % {"kernel": kernel, "params": params, "args": args})
            self._int_params[kernel] = [
                "*" not in p and p.split()[-2] == "int" for p in params.split(",")
            ]
        cpp, library = folder / "kernels.cpp", folder / "kernels.so"
        cpp.write_text(_PRELUDE + source + "".join(entries))
        subprocess.run(["g++", "-O2", "-shared", "-fPIC", str(cpp), "-o", str(library)], check=True)
        self._library = ctypes.CDLL(str(library))

    def launch(self, name: str, grid: int, block: int, args: tuple[Any, ...]) -> None:
        converted: list[object] = [ctypes.c_longlong(grid * block)]
        for int_param, arg in zip(self._int_params[name], args, strict=True):
            if isinstance(arg, np.ndarray):
                assert arg.flags.c_contiguous
                converted.append(ctypes.c_void_p(arg.ctypes.data))
            else:
                converted.append(
                    ctypes.c_int(int(arg)) if int_param else ctypes.c_longlong(int(arg))
                )
        getattr(self._library, f"run_{name}")(*converted)

    def to_host(self, array: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return array
