"""Build a CUDA kernel's own source for the host: one loop iteration per thread.

The kernels here use no shared memory, atomics or synchronisation, so running the threads one
after another computes what the device computes: CI checks the kernel logic against the twin
without a GPU (the launch, the copies and NVRTC itself are left to the ``gpu`` tests).
"""

from __future__ import annotations

import ctypes
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np

_HARNESS = r"""
#define __device__
#define __forceinline__ inline
#define __global__
struct Index { long long x; };
static Index blockIdx, blockDim, threadIdx;
%(source)s
extern "C" void run_all(long long threads, %(params)s) {
    blockDim.x = 1;
    threadIdx.x = 0;
    for (long long i = 0; i < threads; ++i) {
        blockIdx.x = i;
        %(kernel)s(%(args)s);
    }
}
"""


def build_for_host(source: str, kernel: str, folder: Path) -> Callable[..., None]:
    """``run(threads, *args)`` runs ``kernel`` of ``source``; arrays pass as pointers, numbers
    as ``long long`` or ``int`` as the kernel declares them.  g++ must exist: a missing
    compiler fails the test, never skips it."""
    found = re.search(rf"__global__ void {kernel}\((.*?)\)\s*\{{", source, re.DOTALL)
    assert found is not None, f"kernel {kernel} not in the source"
    params = " ".join(found.group(1).split())
    names = [p.replace("*", " ").split()[-1] for p in params.split(",")]
    code = _HARNESS % {
        "source": source,
        "kernel": kernel,
        "params": params,
        "args": ", ".join(names),
    }
    cpp, library = folder / f"{kernel}.cpp", folder / f"{kernel}.so"
    cpp.write_text(code)
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", str(cpp), "-o", str(library)], check=True)
    entry = ctypes.CDLL(str(library)).run_all
    is_int = ["*" not in p and p.split()[-2] == "int" for p in params.split(",")]

    def run(threads: int, *args: object) -> None:
        converted: list[object] = [ctypes.c_longlong(threads)]
        for int_param, arg in zip(is_int, args, strict=True):
            if isinstance(arg, np.ndarray):
                assert arg.flags.c_contiguous
                converted.append(ctypes.c_void_p(arg.ctypes.data))
            else:
                converted.append(
                    ctypes.c_int(int(arg)) if int_param else ctypes.c_longlong(int(arg))
                )
        entry(*converted)

    return run
