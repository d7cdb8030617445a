"""Whether the CuPy kernels can run here: CuPy importable, a CUDA device, NVRTC compiling.

CuPy is imported only inside these functions, never when ``gpu_kernels`` is imported, so the
proxy starts (and the twin runs) on machines without CUDA.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util

PROBE_KERNEL = r"""
extern "C" __global__ void probe(int* out) { out[threadIdx.x] = threadIdx.x * 2; }
"""


@functools.cache
def unavailable_reason() -> str | None:
    """None when the GPU path can run; else why not. Probed once per process."""
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (pip install -e '.[gpu]')"
    try:
        cupy = importlib.import_module("cupy")
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy sees no CUDA device"
        out = cupy.zeros(32, dtype=cupy.int32)
        cupy.RawKernel(PROBE_KERNEL, "probe")((1,), (32,), (out,))
        if out.get().tolist() != [2 * i for i in range(32)]:
            return "the NVRTC probe kernel returned wrong values"
    except Exception as exc:  # any CUDA, driver or NVRTC failure means "no GPU path"
        return f"CUDA probe failed: {type(exc).__name__}: {exc}"
    return None


def is_available() -> bool:
    """True when CuPy imports, a device exists and an NVRTC-compiled kernel runs correctly."""
    return unavailable_reason() is None
