"""Real HTTP on 127.0.0.1 for end-to-end tests: an ASGI app in a uvicorn thread, a transport
that records what the proxy sends upstream, and a scriptable stand-in upstream for faults."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@contextmanager
def serving(app: Any, port: int = 0, start_timeout: float = 60) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (``port``, default a free one) in a thread; yields its URL.
    ``start_timeout``: seconds its start-up may take (a 200K-token vocabulary's proxy takes
    about a minute on two busy cores)."""
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def closed_port_url() -> str:
    """A 127.0.0.1 URL on which nothing listens (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextmanager
def dropping_front(upstream: str, drop: int, armed: threading.Event | None = None) -> Iterator[str]:
    """A TCP front to ``upstream`` whose first ``drop`` connections carrying a POST (counted
    from when ``armed`` is set, if given) read the request and close without a byte of reply
    (what a keep-alive connection closed by the server looks like to the client); other
    connections, and GETs (the proxy's probes), are relayed.  Yields its URL."""
    host, port = upstream.removeprefix("http://").split(":")
    listener = socket.create_server(("127.0.0.1", 0))
    left = [drop]

    def relay(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                head = client.recv(65536)
                dropping = (armed is None or armed.is_set()) and left[0] > 0
                if dropping and not head.startswith(b"GET "):
                    left[0] -= 1
                    client.close()
                    continue
                server = socket.create_connection((host, int(port)))
                server.sendall(head)
                for a, b in ((client, server), (server, client)):
                    threading.Thread(target=relay, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


class RecordingTransport(httpx.AsyncBaseTransport):
    """Real HTTP, and a copy of every request body the proxy sent upstream."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        if body:
            self.sent.append((request.url.path, orjson.loads(body)))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def prompts(self, path: str = "/v1/completions") -> list[Any]:
        return [body["prompt"] for p, body in self.sent if p == path]


@dataclass
class StubUpstream:
    """A stand-in OpenAI-completions upstream (llama.cpp / vLLM ``/v1/completions``) whose
    answers a test scripts.

    ``pieces`` are streamed as completion chunks; ``mode`` injects a fault: "ok", "error500",
    "error400", "stall" (never answers), "die" (drops the connection after two pieces),
    "slow" (one piece every 50 ms, forever). ``tokenize`` answers /tokenize (None: 404).
    Use ``serve()``: it releases stalled and endless handlers before the server stops.
    """

    pieces: list[str] = field(default_factory=lambda: ["Hello", " there", "!"])
    mode: str = "ok"
    tokenize: Callable[[str], list[int]] | None = lambda text: []
    requests: list[dict[str, Any]] = field(default_factory=list)
    callers: list[str] = field(default_factory=list)
    """The ``authorization`` header of each completion request (which proxy sent it)."""
    headers: list[dict[str, str]] = field(default_factory=list)
    """All headers of each completion request."""
    tokenized: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    """The client port of each completion request: one per upstream connection used."""
    cancelled_flag: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/completions", self._complete, methods=["POST"]),
            Route("/tokenize", self._tokenize, methods=["POST"]),
            Route("/health", lambda r: JSONResponse({"status": "ok"})),
        ])

    @contextmanager
    def serve(self, port: int = 0) -> Iterator[str]:
        with serving(self.app(), port) as url:
            try:
                yield url
            finally:
                self.released.set()

    async def _tokenize(self, request: Request) -> Response:
        if self.tokenize is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        body = orjson.loads(await request.body())
        text = body.get("content", body.get("prompt"))
        self.tokenized.append(text)
        return JSONResponse({"tokens": self.tokenize(text)})

    async def _complete(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.requests.append(body)
        self.callers.append(request.headers.get("authorization", ""))
        self.headers.append(dict(request.headers))
        self.ports.append(request.client.port if request.client else 0)
        if self.mode == "error500":
            return JSONResponse({"error": {"message": "boom"}}, status_code=500)
        if self.mode == "error400":
            return JSONResponse({"error": {"message": "prompt too long"}}, status_code=400)
        if self.mode == "stall":
            await self._wait_released(3600)
        n_prompt = len(body["prompt"]) if isinstance(body["prompt"], list) else 0
        if not body.get("stream"):
            return JSONResponse({"choices": [{"text": "".join(self.pieces), "index": 0,
                                              "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": n_prompt, "completion_tokens": 3,
                                           "prompt_tokens_details": {"cached_tokens": 1}}})
        return StreamingResponse(self._stream(n_prompt), media_type="text/event-stream")

    async def _wait_released(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.released.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    async def _stream(self, n_prompt: int) -> AsyncIterator[bytes]:
        try:
            if self.mode == "slow":
                while not self.released.is_set():
                    yield _chunk({"choices": [{"text": "x", "finish_reason": None}]})
                    await asyncio.sleep(0.05)
                return
            for k, piece in enumerate(self.pieces):
                if self.mode == "die" and k == 2:
                    raise RuntimeError("upstream died mid-stream")
                yield _chunk({"choices": [{"text": piece, "index": 0, "finish_reason": None}]})
            yield _chunk({"choices": [{"text": "", "index": 0, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": n_prompt, "completion_tokens": 3}})
            yield b"data: [DONE]\n\n"
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled_flag.set()
            raise


def _chunk(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"
