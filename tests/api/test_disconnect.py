"""A client that gives up before the first upstream byte (a non-streamed call, a stream in
prefill) cancels the upstream request at once, on every API.  The upstream is a raw socket
server that never answers (or sends only its headers) and notes when its connection drops."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from tests.api.test_faults import HELLO, MODEL, proxy

HEADERS_ONLY = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n")  # fmt: skip


class PrefillingUpstream:
    """Accepts one request at a time, reads it, then holds the connection (after sending
    only the response headers, with ``headers``) until the proxy closes it."""

    def __init__(self, headers: bool) -> None:
        self.headers = headers
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.received = threading.Event()
        self.dropped_at: float | None = None
        self.dropped = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                if not head.startswith(b"POST "):  # the proxy's startup probes (/props ...)
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n"
                                 b"connection: close\r\n\r\n")  # fmt: skip
                    continue
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))  # fmt: skip
                while len(body) < length:
                    body += conn.recv(65536)
                if self.headers:
                    conn.sendall(HEADERS_ONLY)
                self.received.set()
                while conn.recv(65536):  # until the proxy closes the connection
                    pass
                self.dropped_at = time.monotonic()
                self.dropped.set()


@contextmanager
def prefilling(headers: bool) -> Iterator[PrefillingUpstream]:
    upstream = PrefillingUpstream(headers)
    try:
        yield upstream
    finally:
        upstream.listener.close()


CALLS = [
    ("/v1/chat/completions", HELLO),
    ("/v1/messages", {"model": MODEL, "max_tokens": 16, "messages": HELLO["messages"]}),
    ("/v1/responses", {"model": MODEL, "input": "Say hello."}),
]


@pytest.mark.parametrize(("stream", "headers"), [(False, False), (True, False), (True, True)],
                         ids=["whole", "stream-no-byte", "stream-headers-only"])
@pytest.mark.parametrize(("path", "body"), CALLS, ids=["chat", "messages", "responses"])
def test_a_client_gone_before_the_first_byte_cancels_the_upstream(
    smollm2_dir: Path, path: str, body: dict[str, object], stream: bool, headers: bool
) -> None:
    with prefilling(headers) as upstream, \
            proxy(upstream.url, smollm2_dir, read_timeout=60) as http:  # fmt: skip
        host, port = http.base_url.host, http.base_url.port
        payload = orjson.dumps(dict(body, stream=stream))
        client = socket.create_connection((host, port))
        client.sendall(b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                       b"content-length: %d\r\n\r\n%s" % (path.encode(), len(payload), payload))
        assert upstream.received.wait(30)
        time.sleep(0.2)  # the proxy is now waiting for the upstream
        client.close()
        closed = time.monotonic()
        assert upstream.dropped.wait(5), "the upstream request outlived its client"
        assert upstream.dropped_at is not None
        print(f"{path} stream={stream} headers={headers}: upstream dropped "
              f"{(upstream.dropped_at - closed) * 1000:.1f} ms after the client")
