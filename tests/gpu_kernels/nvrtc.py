"""NVRTC without a GPU: compile ``kernels.cu`` as ``cuda_source.module()`` does on a device.

NVRTC is a library that needs no driver or device, and ``nvidia-cuda-nvrtc-cu12`` (a dev
dependency, the NVRTC that CuPy's CUDA 12 wheels load) ships it.  So CI proves that the source
compiles for the device, kernel by kernel through ptxas, and reads ptxas's resource report,
on machines where only the host build of the kernels can run.
"""

from __future__ import annotations

import ctypes
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

_PTXAS_ENTRY = re.compile(
    r"Compiling entry function '(\w+)' for 'sm_\d+'.*?"
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads.*?"
    r"Used (\d+) registers",
    re.DOTALL,
)


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one entry function."""

    stack_bytes: int
    spill_stores: int
    spill_loads: int
    registers: int


@dataclass(frozen=True)
class Compiled:
    log: str
    kernels: dict[str, KernelResources]


class CompileError(Exception):
    pass


def library() -> ctypes.CDLL:
    """``libnvrtc`` of the ``nvidia-cuda-nvrtc-cu12`` package (ImportError when it is absent)."""
    package = importlib.import_module("nvidia.cuda_nvrtc")
    (folder,) = package.__path__
    nvrtc = ctypes.CDLL(str(Path(folder) / "lib" / "libnvrtc.so.12"))
    nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
    return nvrtc


def compile_for(source: str, options: tuple[str, ...], arch: str) -> Compiled:
    """Compile ``source`` to a cubin for ``arch`` (``sm_90``: the H200) with ``options``, ptxas
    reporting each kernel's resources; CompileError with NVRTC's log when it fails."""
    nvrtc = library()
    program = ctypes.c_void_p()
    _check(nvrtc, nvrtc.nvrtcCreateProgram(
        ctypes.byref(program), source.encode(), b"kernels.cu", 0, None, None
    ))  # fmt: skip
    try:
        flags = [*options, f"--gpu-architecture={arch}", "--ptxas-options=-v"]
        argv = (ctypes.c_char_p * len(flags))(*(flag.encode() for flag in flags))
        result = nvrtc.nvrtcCompileProgram(program, len(flags), argv)
        size = ctypes.c_size_t()
        _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size)))
        buffer = ctypes.create_string_buffer(size.value)
        _check(nvrtc, nvrtc.nvrtcGetProgramLog(program, buffer))
        log = buffer.value.decode()
        if result != 0:
            raise CompileError(f"{_error(nvrtc, result)}\n{log}")
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
    kernels = {
        name: KernelResources(*map(int, numbers))
        for name, *numbers in _PTXAS_ENTRY.findall(log)
    }
    return Compiled(log, kernels)


def _check(nvrtc: ctypes.CDLL, result: int) -> None:
    if result != 0:
        raise CompileError(_error(nvrtc, result))


def _error(nvrtc: ctypes.CDLL, result: int) -> str:
    message: bytes = nvrtc.nvrtcGetErrorString(result)
    return message.decode()
