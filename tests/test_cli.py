"""The command line as a user runs it: ``serve`` and ``demo`` stop cleanly on Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.api.servers import StubUpstream, closed_port_url


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_ctrl_c_stops_without_a_traceback(command: str, smollm2_dir: Path) -> None:
    port = closed_port_url().rsplit(":", 1)[1]
    with StubUpstream().serve() as upstream:
        args = [sys.executable, "-m", "app", command, "--port", port]
        if command == "serve":
            args += ["--upstream", upstream, "--tokenizer", str(smollm2_dir), "--model", "m"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health/live").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "did not start"
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0
    assert b"Traceback" not in err and b"Shutting down" in err
