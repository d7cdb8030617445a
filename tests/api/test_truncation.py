"""An upstream answer that ends without a finish reason (a stream cut short without
``[DONE]``, an empty stream, a 200 that is not SSE, a completion without ``finish_reason``)
reaches the client as an error in its API's format, never as a complete answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.api.servers import serving
from tests.api.test_faults import HELLO, MODEL, assert_openai_error, proxy, sse

CUT = [b'data: {"choices": [{"text": "Hel", "index": 0, "finish_reason": null}]}\n\n']
STREAMS = {"cut": CUT, "empty": [], "not_sse": [b"<html>busy</html>\n"]}


@contextmanager
def truncating(kind: str) -> Iterator[str]:
    """An upstream whose every answer ends without a finish reason."""

    async def complete(request: Request) -> Response:
        body = orjson.loads(await request.body())
        if not body.get("stream"):
            return JSONResponse({"choices": [{"text": "Hel", "index": 0, "finish_reason": None}]})

        async def events() -> AsyncIterator[bytes]:
            for event in STREAMS[kind]:
                yield event

        media = "text/html" if kind == "not_sse" else "text/event-stream"
        return StreamingResponse(events(), media_type=media)

    app = Starlette(routes=[Route("/v1/completions", complete, methods=["POST"]),
                            Route("/completion", complete, methods=["POST"])])  # fmt: skip
    with serving(app) as url:
        yield url


ANTHROPIC = {"model": MODEL, "max_tokens": 16, "messages": HELLO["messages"]}
RESPONSES = {"model": MODEL, "input": "Say hello."}


def test_a_completion_without_finish_reason_is_502_on_every_api(smollm2_dir: Path) -> None:
    with truncating("cut") as upstream, proxy(upstream, smollm2_dir) as http:
        error = assert_openai_error(http.post("/v1/chat/completions", json=HELLO), 502)
        assert "finish reason" in error["message"]
        assert_openai_error(http.post("/v1/responses", json=RESPONSES), 502)
        reply = http.post("/v1/messages", json=ANTHROPIC)
        assert reply.status_code == 502
        assert reply.json()["type"] == "error" and reply.json()["error"]["type"] == "api_error"
        counted = http.get("/metrics").text
        for api in ("chat", "messages", "responses"):
            assert (f'toksplice_refusals_total{{api="{api}",reason="upstream_truncated",'
                    'status="502"} 1.0') in counted


@pytest.mark.parametrize("kind", sorted(STREAMS))
def test_a_stream_without_finish_reason_ends_with_an_error_event(
    smollm2_dir: Path, kind: str
) -> None:
    with truncating(kind) as upstream, proxy(upstream, smollm2_dir) as http:
        with http.stream("POST", "/v1/chat/completions", json=HELLO | {"stream": True}) as reply:
            events = sse(reply)
        assert events[-1] == "[DONE]"
        *chunks, error = [orjson.loads(e) for e in events[:-1]]
        assert not any(c["choices"][0]["finish_reason"] for c in chunks)
        assert error["error"]["type"] == "upstream_error"
        assert "finish reason" in error["error"]["message"]

        with http.stream("POST", "/v1/messages", json=ANTHROPIC | {"stream": True}) as reply:
            lines = list(reply.iter_lines())
        names = [line[7:] for line in lines if line.startswith("event: ")]
        assert names[-1] == "error" and "message_stop" not in names
        assert '"stop_reason":"end_turn"' not in "".join(lines)

        with http.stream("POST", "/v1/responses", json=RESPONSES | {"stream": True}) as reply:
            lines = list(reply.iter_lines())
        names = [line[7:] for line in lines if line.startswith("event: ")]
        assert names[-1] == "response.failed" and "response.completed" not in names
        counted = http.get("/metrics").text  # each error event counted as a refusal
        for api in ("chat", "messages", "responses"):
            assert (f'toksplice_refusals_total{{api="{api}",reason="upstream_truncated",'
                    'status="502"} 1.0') in counted
