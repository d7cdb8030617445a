"""``kernels.cu`` compiles with NVRTC for the device, as ``cuda_source.module()`` compiles it,
on any machine (NVRTC needs no GPU): every kernel through ptxas, none spilling registers."""

from __future__ import annotations

import importlib.util

import pytest

from gpu_kernels.cuda_source import OPTIONS, SOURCE
from gpu_kernels.device import PROBE_KERNEL
from tests.gpu_kernels.host_build import kernel_signatures
from tests.gpu_kernels.nvrtc import CompileError, compile_for

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nvidia.cuda_nvrtc") is None,
    reason="NVRTC is not installed (nvidia-cuda-nvrtc-cu12, in the dev extra)",
)

ARCHITECTURES = ["sm_90", "sm_80"]
"""The H200 the device checks run on, and the A100 generation before it."""


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_kernel_compiles_for_the_device_without_spills(arch: str) -> None:
    compiled = compile_for(SOURCE, OPTIONS, arch)
    assert "warning" not in compiled.log.lower(), compiled.log
    assert set(compiled.kernels) == {name for name, _ in kernel_signatures(SOURCE)}
    for name, used in compiled.kernels.items():
        assert (used.spill_stores, used.spill_loads) == (0, 0), (name, used)


def test_the_probe_kernel_compiles() -> None:
    assert set(compile_for(PROBE_KERNEL, (), "sm_90").kernels) == {"probe"}


def test_a_broken_kernel_fails_with_nvrtcs_log() -> None:
    broken = SOURCE.replace("int n = (int)(end[p] - b);", "int n = (int)(end[p] - b)", 1)
    assert broken != SOURCE
    with pytest.raises(CompileError, match=r"kernels\.cu\(\d+\): error"):
        compile_for(broken, OPTIONS, "sm_90")
