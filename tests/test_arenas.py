"""The proxy's process keeps at most two glibc malloc arenas, however many threads allocate,
unless ``MALLOC_ARENA_MAX`` says otherwise."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")

_ARENAS_AFTER_THREADS = """
import ctypes, sys, threading
from app.arenas import limit_arenas
limited = limit_arenas() if sys.argv[1] == "limit" else None
together = threading.Barrier(12)
def work():
    blocks = [bytearray(1 << 16) for _ in range(16)]
    together.wait()  # all alive at once: no arena passes from an ended thread to a new one
threads = [threading.Thread(target=work) for _ in range(12)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fclose.argtypes = [ctypes.c_void_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
out = libc.fopen(sys.argv[2].encode(), b"w")
libc.malloc_info(0, out)
libc.fclose(out)
print(limited, open(sys.argv[2]).read().count("<heap nr="))
"""


def arenas(tmp_path: Path, how: str, env: dict[str, str]) -> tuple[str, int]:
    """(what ``limit_arenas`` returned, arenas in use) after twelve threads allocated."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    args = [sys.executable, "-c", _ARENAS_AFTER_THREADS, how, str(tmp_path / "info.xml")]
    limited, count = subprocess.run(
        args, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    return limited, int(count)


def test_two_arenas_at_most(tmp_path: Path) -> None:
    assert arenas(tmp_path, "limit", {}) == ("True", 2)
    assert arenas(tmp_path, "no limit", {})[1] > 2  # glibc's own default: one per thread


def test_the_environment_decides_when_it_says(tmp_path: Path) -> None:
    assert arenas(tmp_path, "limit", {"MALLOC_ARENA_MAX": "3"}) == ("False", 3)
