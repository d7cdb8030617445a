"""The device probe: lazy, and a clear "no" on machines without CuPy or a GPU."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from gpu_kernels import is_available, unavailable_reason
from tests.conftest import REPO_ROOT


def test_importing_the_package_does_not_import_cupy() -> None:
    code = "import sys, gpu_kernels; assert 'cupy' not in sys.modules, 'cupy imported eagerly'"
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)


def test_is_available_agrees_with_its_reason() -> None:
    reason = unavailable_reason()
    assert is_available() is (reason is None)
    if importlib.util.find_spec("cupy") is None:
        assert reason is not None
        assert "CuPy is not installed" in reason
