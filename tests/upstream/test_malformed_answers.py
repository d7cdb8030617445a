"""Fault injection at the dialect boundary: an upstream (scripted, one per dialect) answers
with JSON of the wrong shape: a list or a string for the completion, ``choices`` as an
object, a number for the text, a non-numeric usage, ``finish_reason: 5``.  Every client API
gets a 502 in its own error format, or mid-stream its own error event and then a clean end
(chat: an error chunk and ``[DONE]``; Anthropic: ``event: error``; Responses:
``response.failed``); never a 500, never a cut connection."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from app.config import DIALECTS, Settings
from app.errors import UpstreamMalformedError
from app.main import create_app
from app.upstream import dialect_named
from tests.api.servers import serving

MODEL = "m"
MESSAGES = [{"role": "user", "content": "Say hello."}]
ODD_SHAPES: list[Any] = [[1, 2], "oops", 5, None]
"""Not an object at all: the same for every dialect."""

STARTS: dict[str, dict[str, Any]] = {
    "llamacpp": {"choices": [{"index": 0, "text": "Hel", "finish_reason": None}]},
    "vllm-completions": {"choices": [{"index": 0, "text": "Hel", "finish_reason": None}]},
    "llamacpp-completion": {"content": "Hel", "stop": False},
    "vllm-generate": {"choices": [{"index": 0, "token_ids": [28], "finish_reason": None}]},
    "sglang": {"text": "Hel", "output_ids": [28], "meta_info": {"completion_tokens": 1}},
    "vllm-chat": {"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]},
}
"""A well-formed first event of each dialect's stream: the client's stream has begun."""

_COMPLETIONS = [
    {"choices": {"text": "x", "finish_reason": "stop"}},
    {"choices": [{"text": 5, "finish_reason": "stop"}]},
    {"choices": [{"text": "x", "finish_reason": 5}]},
    {"choices": [{"text": "x", "finish_reason": "sideways"}]},
    {"choices": [{"text": "x", "finish_reason": "stop"}], "usage": {"completion_tokens": "many"}},
    {"choices": [{"text": "x", "finish_reason": "stop"}], "usage": [3]},
    {"choices": ["x"]},
]
MALFORMED: dict[str, list[Any]] = {
    "llamacpp": _COMPLETIONS,
    "vllm-completions": [*_COMPLETIONS, {"choices": [{"text": "x", "finish_reason": "abort"}]}],
    "llamacpp-completion": [
        {"content": 5, "stop": True},
        {"content": "x", "stop": "yes"},
        {"content": "x", "stop": True, "tokens_predicted": "many"},
        {"content": "x", "stop": True, "timings": {"cache_n": -1}},
        {"content": "x", "stop": True, "stop_type": 7},
    ],
    "vllm-generate": [
        {"choices": [{"token_ids": [1, "a"], "finish_reason": "stop"}]},
        {"choices": [{"token_ids": "abc", "finish_reason": "stop"}]},
        {"choices": [{"token_ids": [1 << 64], "finish_reason": "stop"}]},
        {"choices": [{"token_ids": [1], "finish_reason": 5}]},
        {"choices": {"token_ids": [1]}},
    ],
    "sglang": [
        {"text": 5, "meta_info": {"finish_reason": {"type": "stop"}}},
        {"text": "x", "meta_info": {"finish_reason": "stop"}},
        {"text": "x", "meta_info": {"finish_reason": {"type": "stop"}, "completion_tokens": "2"}},
        {"text": "x", "meta_info": [1]},
    ],
    "vllm-chat": [
        {"choices": {"message": {"content": "x"}}},
        {
            "choices": [
                {"message": {"content": 5}, "delta": {"content": 5}, "finish_reason": "stop"}
            ]
        },
        {"choices": [{"message": {"content": "x"}, "delta": {}, "finish_reason": 5}]},
        {
            "choices": [
                {
                    "message": {"tool_calls": {"a": 1}},
                    "delta": {"tool_calls": {"a": 1}},
                    "finish_reason": "stop",
                }
            ]
        },
        {
            "choices": [
                {"message": {"content": "x"}, "delta": {"content": "x"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": "x"},
        },
    ],
}
"""Wrong in one field each, per dialect (vLLM chat's carry both ``message`` and ``delta`` so
that one answer serves the whole and the streamed call)."""


@dataclass
class Scripted:
    """Answers every generation request with ``answer``: whole, or streamed after one
    well-formed event."""

    dialect: str
    answer: Any = None
    requests: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        paths = (
            "/v1/completions",
            "/completion",
            "/v1/chat/completions",
            "/inference/v1/generate",
            "/generate",
        )
        return Starlette(routes=[Route(p, self._answer, methods=["POST"]) for p in paths])

    async def _answer(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.requests.append(request.url.path)
        if not body.get("stream"):
            return Response(json.dumps(self.answer), media_type="application/json")

        async def events() -> AsyncIterator[bytes]:
            for payload in (STARTS[self.dialect], self.answer):
                yield f"data: {json.dumps(payload)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


@pytest.fixture
def proxied(
    request: pytest.FixtureRequest, smollm2_dir: Path
) -> Iterator[tuple[Scripted, httpx.Client]]:
    scripted = Scripted(request.param)
    with serving(scripted.app()) as upstream:
        settings = Settings(
            upstream=upstream,
            tokenizer=smollm2_dir,
            model=MODEL,
            dialect=request.param,
            alignment_check=False,
            shadow_rate=0.0,
        )
        with serving(create_app(settings)) as url, httpx.Client(base_url=url, timeout=30) as http:
            yield scripted, http


BODIES = {
    "/v1/chat/completions": {"model": MODEL, "messages": MESSAGES},
    "/v1/messages": {"model": MODEL, "max_tokens": 16, "messages": MESSAGES},
    "/v1/responses": {"model": MODEL, "input": "Say hello."},
}


def check_whole(path: str, reply: httpx.Response, answer: Any) -> None:
    """A 502 in the API's own error format."""
    assert reply.status_code == 502, (answer, reply.text)
    error = reply.json()
    if path == "/v1/messages":
        assert error["type"] == "error" and error["error"]["type"] == "api_error"
    else:
        assert error["error"]["type"] == "upstream_error", error
    assert "malformed" in str(error) or "ended the answer" in str(error), (answer, error)


def check_streamed(path: str, reply: httpx.Response, answer: Any) -> None:
    """The stream began (200), then the API's error event, then a clean end."""
    assert reply.status_code == 200, answer
    lines = list(reply.iter_lines())
    assert lines, answer
    data = [line[6:] for line in lines if line.startswith("data: ")]
    names = [line[7:] for line in lines if line.startswith("event: ")]
    if path == "/v1/chat/completions":
        assert data[-1] == "[DONE]", (answer, data)
        error = orjson.loads(data[-2])["error"]
        assert error["type"] == "upstream_error"
        chunks = [orjson.loads(d) for d in data[:-2]]
        assert not any(c["choices"] and c["choices"][0]["finish_reason"] for c in chunks)
    elif path == "/v1/messages":
        assert names[-1] == "error" and "message_stop" not in names, (answer, names)
    else:
        assert names[-1] == "response.failed" and "response.completed" not in names, answer


@pytest.mark.parametrize("proxied", DIALECTS, indirect=True)
def test_a_malformed_answer_is_the_apis_own_error(proxied: tuple[Scripted, httpx.Client]) -> None:
    """Each malformed answer of the dialect, on each client API, whole and streamed."""
    scripted, http = proxied
    for answer in [*ODD_SHAPES, *MALFORMED[scripted.dialect]]:
        scripted.answer = answer
        for path, body in BODIES.items():
            check_whole(path, http.post(path, json=body), answer)
            with http.stream("POST", path, json=body | {"stream": True}) as reply:
                check_streamed(path, reply, answer)
    assert 'status="500"' not in http.get("/metrics").text


@pytest.mark.parametrize("proxied", DIALECTS, indirect=True)
def test_finish_reasons_reach_chat_clients_from_the_known_set(
    proxied: tuple[Scripted, httpx.Client],
) -> None:
    """A well-formed answer's finish reason is a string of OpenAI's set, streamed or not."""
    scripted, http = proxied
    whole = {
        "llamacpp": {"choices": [{"text": "x", "finish_reason": "length"}]},
        "vllm-completions": {"choices": [{"text": "x", "finish_reason": "length"}]},
        "llamacpp-completion": {"content": "x", "stop": True, "stop_type": "limit"},
        "vllm-generate": {"choices": [{"token_ids": [28], "finish_reason": "length"}]},
        "sglang": {"text": "x", "meta_info": {"finish_reason": {"type": "length"}}},
        "vllm-chat": {
            "choices": [{"message": {"content": "x"}, "delta": {}, "finish_reason": "length"}]
        },
    }
    scripted.answer = whole[scripted.dialect]
    body = BODIES["/v1/chat/completions"]
    reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["finish_reason"] == "length"
    with http.stream("POST", "/v1/chat/completions", json=body | {"stream": True}) as streamed:
        data = [line[6:] for line in streamed.iter_lines() if line.startswith("data: ")]
    reasons = [
        c["choices"][0]["finish_reason"] for c in map(orjson.loads, data[:-1]) if c["choices"]
    ]
    assert [r for r in reasons if r is not None] == ["length"]


@pytest.mark.parametrize(
    ("dialect", "answer"),
    [("llamacpp", {"default_generation_settings": [1]}), ("sglang", {"data": 5}),
     ("sglang", {"data": ["card"]})],
)  # fmt: skip
def test_a_malformed_context_answer_is_an_upstream_error(dialect: str, answer: Any) -> None:
    """The start-up context probe's answer is read the same way: an upstream error, which
    the probe takes as "context unknown", not an exception of Python's."""
    with pytest.raises(UpstreamMalformedError):
        dialect_named(dialect).context_response(answer, MODEL)
