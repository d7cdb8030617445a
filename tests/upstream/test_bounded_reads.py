"""What is read from the upstream is bounded: one line of a stream by
``upstream_max_line_bytes``, a whole answer by ``upstream_max_body_bytes``.  Past either the
client gets a 502, or mid-stream its API's error event, and the proxy's memory does not
follow the upstream's bytes (a single 512 MB SSE line is read 1 MiB at most)."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from app.config import Settings
from app.errors import UpstreamTooLargeError
from app.main import create_app
from app.process_memory import resident_bytes
from app.upstream.client import sse_lines
from tests.api.servers import serving

MODEL = "m"
HELLO = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}]}
MIB = 1 << 20


async def _parts(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def _lines(parts: list[bytes], limit: int) -> list[bytes]:
    return [line async for line in sse_lines(_parts(parts), limit)]


lines = st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")))
ends = st.sampled_from([b"\n", b"\r\n", b"\r"])


@given(lines, st.lists(ends, min_size=1), st.lists(st.integers(0, 200), max_size=12))
def test_lines_split_as_sse_reads_them_in_any_parts(
    texts: list[bytes], line_ends: list[bytes], cuts: list[int]
) -> None:
    """However the bytes are cut into parts (a "\\r\\n" split between two too), the lines
    are the stream's lines (``bytes.splitlines``: "\\n", "\\r\\n" and "\\r" end one)."""
    stream = b"".join(t + line_ends[k % len(line_ends)] for k, t in enumerate(texts))
    bounds = sorted({0, len(stream), *(min(c, len(stream)) for c in cuts)})
    parts = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    assert asyncio.run(_lines(parts, 1024)) == stream.splitlines()


def test_a_line_over_the_limit_raises_before_more_is_held() -> None:
    assert asyncio.run(_lines([b"data: " + b"x" * 90, b"\n"], 100)) == [b"data: " + b"x" * 90]
    with pytest.raises(UpstreamTooLargeError):
        asyncio.run(_lines([b"x" * 60, b"x" * 60], 100))  # no end of line yet
    with pytest.raises(UpstreamTooLargeError):
        asyncio.run(_lines([b"x" * 150 + b"\nok\n"], 100))


def test_the_defaults_are_the_documented_ones() -> None:
    settings = Settings()
    assert settings.upstream_max_line_bytes == 16 * MIB
    assert settings.upstream_max_body_bytes == 64 * MIB


@contextmanager
def oversized(line_mib: int, body_mib: int) -> Iterator[str]:
    """An upstream whose stream is one ``line_mib`` MiB line (sent 1 MiB a time, the same
    bytes object: the upstream itself holds 1 MiB) and whose whole answers are ``body_mib``
    MiB, with and without a declared length."""
    block = b"x" * MIB

    async def complete(request: Request) -> Response:
        body = orjson.loads(await request.body())
        if body.get("stream"):

            async def line() -> AsyncIterator[bytes]:
                yield b'data: {"choices": [{"text": "'
                for _ in range(line_mib):
                    yield block

            return StreamingResponse(line(), media_type="text/event-stream")
        whole = b'{"choices": [{"text": "' + b"x" * (body_mib * MIB) + b'"}]}'
        if request.url.path == "/completion":  # llama.cpp's own path: sent chunked

            async def chunked() -> AsyncIterator[bytes]:
                for at in range(0, len(whole), MIB):
                    yield whole[at : at + MIB]

            return StreamingResponse(chunked(), media_type="application/json")
        return Response(whole, media_type="application/json")

    app = Starlette(routes=[Route(p, complete, methods=["POST"])
                            for p in ("/v1/completions", "/completion")])  # fmt: skip
    with serving(app) as url:
        yield url


@contextmanager
def proxy(upstream: str, folder: Path, **limits: int) -> Iterator[httpx.Client]:
    settings = Settings(upstream=upstream, tokenizer=folder, model=MODEL, alignment_check=False,
                        shadow_rate=0.0, **limits)  # fmt: skip
    with serving(create_app(settings)) as url, httpx.Client(base_url=url, timeout=120) as http:
        yield http


class PeakRss:
    """The highest RSS of this process seen every 5 ms while in the ``with``, minus RSS at
    its start."""

    def __init__(self) -> None:
        self.start = self.peak = resident_bytes() or 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(0.005):
            self.peak = max(self.peak, resident_bytes() or 0)

    @property
    def growth(self) -> int:
        return self.peak - self.start


def test_a_huge_sse_line_is_an_error_event_and_memory_stays_bounded(smollm2_dir: Path) -> None:
    """A single 512 MB line (the issue's was 1 GB, and took the proxy to 5.1 GB RSS) against
    a 1 MiB line limit: the stream ends with the error event, and the process grew by far
    less than the line (the proxy and the upstream run in this process)."""
    streamed = HELLO | {"stream": True}
    with (
        oversized(line_mib=512, body_mib=1) as upstream,
        proxy(upstream, smollm2_dir, upstream_max_line_bytes=MIB) as http,
        PeakRss() as rss,
        http.stream("POST", "/v1/chat/completions", json=streamed) as reply,
    ):
        assert reply.status_code == 200
        data = [line[6:] for line in reply.iter_lines() if line.startswith("data: ")]
    assert rss.growth < 64 * MIB, f"RSS grew {rss.growth / MIB:.0f} MiB"
    assert data[-1] == "[DONE]"
    error = orjson.loads(data[-2])["error"]
    assert error["type"] == "upstream_error" and "over" in error["message"], error


@pytest.mark.parametrize("declared", [True, False])
def test_a_whole_answer_over_the_limit_is_502(smollm2_dir: Path, declared: bool) -> None:
    """Over ``upstream_max_body_bytes``: refused from its declared length, or once that many
    bytes of a chunked answer were read."""
    body = HELLO if declared else HELLO | {"stop": ["\n\n"]}  # a stop: llama.cpp's own path
    with (
        oversized(line_mib=1, body_mib=4) as upstream,
        proxy(upstream, smollm2_dir, upstream_max_body_bytes=MIB) as http,
    ):
        reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 502, reply.text[:300]
    assert "over the 1048576-byte limit" in reply.json()["error"]["message"]
