"""Real system services for tests, on free 127.0.0.1 ports: ``redis-server`` and ``nginx``
(Debian packages; ``.ci/run`` installs them).  A missing binary fails the test, never skips."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis

from loadtest.processes import free_port

__all__ = ["RedisServer", "binary", "free_port"]


def binary(name: str) -> str:
    path = shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name, Path("/usr/bin") / name) if p.exists()), None
    )
    if path is None:
        pytest.fail(
            f"{name} is not installed: apt-get install -y {name.split('-')[0]}"
            f"{'-server' if name == 'redis-server' else ''} (see .ci/run)"
        )
    return path


class RedisServer:
    """A throwaway ``redis-server`` (no persistence, 64 MB, volatile-lru) that can be stopped
    and started again on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [
                binary("redis-server"),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--maxmemory",
                "64mb",
                "--maxmemory-policy",
                "volatile-lru",
            ],
            stdout=subprocess.DEVNULL,
        )
        client = self.client()
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=10)
            self._proc = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=2)
