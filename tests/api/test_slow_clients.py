"""Slow and silent clients cannot hold sockets: the proxy as ``toksplice serve`` configures
uvicorn (``server_config``) closes a connection whose request head is not complete within
``header_timeout``, however steadily it trickles, and idle connections likewise."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from app.config import Settings
from app.serve import server_config
from tests.api.servers import StubUpstream
from tests.api.test_faults import HELLO, MODEL

HEADER_TIMEOUT = 1.0


@contextmanager
def served(upstream: str, folder: Path) -> Iterator[tuple[str, int]]:
    settings = Settings(upstream=upstream, tokenizer=folder, model=MODEL, alignment_check=False,
                        port=0, header_timeout=HEADER_TIMEOUT, keep_alive_timeout=1,
                        log_level="warning")  # fmt: skip
    server = uvicorn.Server(server_config(settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive()
        time.sleep(0.02)
    try:
        yield "127.0.0.1", server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(15)


def _closed_by_server(sock: socket.socket, trickle: bytes, until: float) -> float | None:
    """Sends ``trickle`` every 0.2 s; when the server closes, the seconds it took."""
    started = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() < until:
        try:
            if sock.recv(4096) == b"":
                return time.monotonic() - started
        except TimeoutError:
            pass
        try:
            sock.sendall(trickle)
        except OSError:
            return time.monotonic() - started
    return None


def test_slow_headers_and_idle_sockets_are_closed(smollm2_dir: Path) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, served(upstream, smollm2_dir) as (host, port):
        slow = socket.create_connection((host, port))
        slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        idle = [socket.create_connection((host, port)) for _ in range(50)]
        took = _closed_by_server(slow, b"x-slow: 1\r\n", time.monotonic() + 10 * HEADER_TIMEOUT)
        assert took is not None, "a trickling request head kept its connection"
        print(f"slow header client closed after {took:.2f} s")
        deadline = time.monotonic() + 10 * HEADER_TIMEOUT
        for sock in idle:
            assert _closed_by_server(sock, b"", deadline) is not None, "an idle socket stayed"
        # a prompt client is served as before, on a connection older than the deadline
        with httpx.Client(base_url=f"http://{host}:{port}", timeout=30) as http:
            assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
            time.sleep(HEADER_TIMEOUT / 2)
            assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
