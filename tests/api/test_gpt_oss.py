"""gpt-oss end to end in harmony, with its real chat template and tokenizer (o200k_harmony).

Out: an upstream answering the way each server returns gpt-oss's output when asked to keep
special tokens (vLLM and SGLang leave out the stop token that ended the turn; llama.cpp
writes it; vLLM's generate API returns its id) reaches the client as reasoning and tool calls,
with no harmony marker anywhere in what the client reads.  In: the reasoning a client sends
back (a Responses ``reasoning`` item, an Anthropic ``thinking`` block) is rendered as the
analysis channel gpt-oss expects, the ids are the reference encode of the template's
rendering, and the continuation is repaired, not encoded afresh.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from tokenizers import Tokenizer

from app.config import Settings
from app.main import create_app
from app.protocol.responses_request import chat_body
from app.rendering import ChatTemplate
from app.tools import assets as app_assets
from tests.api.servers import serving
from tests.protocol.output.helpers import HARMONY_MARKERS

MODEL = "m"
CALL, RETURN = 200012, 200002
ANSWER = (
    "<|channel|>analysis<|message|>The user wants Paris's weather; call the tool.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city": "Paris"}'
)
"""A turn that ends in a call, as the model writes it (``<|call|>`` follows: the stop)."""
THOUGHT = "The user wants Paris's weather; call the tool."
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
QUESTION = "Weather in Paris?"


@dataclass(frozen=True)
class GptOss:
    folder: Path
    template: Path

    @property
    def tokenizer(self) -> Tokenizer:
        return Tokenizer.from_file(str(self.folder / "tokenizer.json"))

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ids

    def render(self, chat: dict[str, Any]) -> str:
        template = ChatTemplate.from_jinja_file(self.template)  # it names no *_token
        return template.render(chat["messages"], tools=chat.get("tools"))


@pytest.fixture(scope="module")
def gpt_oss(assets_dir: Path) -> GptOss:
    folder = app_assets.models(assets_dir, without_npm=True)["gpt_oss"].parent
    return GptOss(folder, app_assets.templates(assets_dir)["openai-gpt-oss-120b"])


@dataclass
class HarmonyUpstream:
    """One server's API answering ``text`` the way that server returns it: ``pieces`` of it
    streamed (SGLang: cumulative), the turn's stop token as that server reports it."""

    dialect: str
    tokenizer: Tokenizer
    text: str = ANSWER
    size: int = 7
    """Characters per streamed piece."""
    requests: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> Starlette:
        routes = {
            "/v1/completions": self._completions,
            "/inference/v1/generate": self._generate,
            "/generate": self._sglang,
        }
        return Starlette(
            routes=[
                Route(path, self._recorded(handler), methods=["POST"])
                for path, handler in routes.items()
            ]
        )

    def _recorded(self, handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            body = orjson.loads(await request.body())
            self.requests.append(body)
            result: Response = handler(body)
            return result

        return endpoint

    def pieces(self, text: str) -> list[str]:
        return [text[i : i + self.size] for i in range(0, len(text), self.size)]

    def _completions(self, body: dict[str, Any]) -> Response:
        llama = self.dialect == "llamacpp"  # writes the kept stop token; vLLM leaves it out
        text = self.text + ("<|call|>" if llama else "")
        end = {
            "index": 0,
            "text": "",
            "finish_reason": "stop",
            "stop_reason": None if llama else CALL,
        }
        usage = {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}
        if not body["stream"]:
            return JSONResponse({"choices": [end | {"text": text}], "usage": usage})
        chunks = [
            {"choices": [{"index": 0, "text": p, "finish_reason": None}]} for p in self.pieces(text)
        ]
        return _sse([*chunks, {"choices": [end]}, {"choices": [], "usage": usage}])

    def _generate(self, body: dict[str, Any]) -> Response:
        """vLLM's tokens out: the ids keep the stop token."""
        ids = [*self.tokenizer.encode(self.text, add_special_tokens=False).ids, CALL]
        usage = {"prompt_tokens": 3, "completion_tokens": len(ids), "total_tokens": 3 + len(ids)}
        if not body["stream"]:
            return JSONResponse(
                {
                    "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}],
                    "usage": usage,
                }
            )
        chunks: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "token_ids": [t], "finish_reason": None}]} for t in ids
        ]
        chunks[-1]["choices"][0]["finish_reason"] = "stop"
        return _sse([*chunks, {"choices": [], "usage": usage}])

    def _sglang(self, body: dict[str, Any]) -> Response:
        pieces = self.pieces(self.text)
        meta = {"prompt_tokens": 3, "completion_tokens": len(pieces), "cached_tokens": 0}
        finish = {"type": "stop", "matched": CALL}
        if not body["stream"]:
            return JSONResponse(
                {
                    "text": self.text,
                    "output_ids": list(range(len(pieces))),
                    "meta_info": meta | {"finish_reason": finish},
                }
            )
        events = [
            {
                "text": "".join(pieces[:n]),
                "output_ids": list(range(n)),
                "meta_info": meta
                | {"completion_tokens": n, "finish_reason": finish if n == len(pieces) else None},
            }
            for n in range(1, len(pieces) + 1)
        ]
        return _sse(events)


def _sse(payloads: list[dict[str, Any]]) -> Response:
    async def events() -> AsyncIterator[bytes]:
        for payload in payloads:
            yield b"data: " + orjson.dumps(payload) + b"\n\n"
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


Proxied = Callable[[str], tuple[httpx.Client, "HarmonyUpstream"]]


@pytest.fixture(scope="module")
def proxied(gpt_oss: GptOss) -> Iterator[Proxied]:
    """``dialect -> (client of the proxy, its upstream)``: one proxy per dialect for the
    module (each start reads the 200K-token vocabulary), the upstream reset for each use."""
    with ExitStack() as stack:
        made: dict[str, tuple[httpx.Client, HarmonyUpstream]] = {}

        def get(dialect: str) -> tuple[httpx.Client, HarmonyUpstream]:
            if dialect not in made:
                upstream = HarmonyUpstream(dialect, gpt_oss.tokenizer)
                up = stack.enter_context(serving(upstream.app()))
                settings = Settings(
                    upstream=up,
                    tokenizer=gpt_oss.folder,
                    model=MODEL,
                    chat_template=gpt_oss.template,
                    dialect=dialect,
                    alignment_check=False,
                )
                url = stack.enter_context(serving(create_app(settings), start_timeout=300))
                made[dialect] = (
                    stack.enter_context(httpx.Client(base_url=url, timeout=60)),
                    upstream,
                )
            http, upstream = made[dialect]
            upstream.text, upstream.size = ANSWER, 7
            upstream.requests.clear()
            return http, upstream

        yield get


def streamed(http: httpx.Client, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with http.stream("POST", path, json=body | {"stream": True}) as reply:
        assert reply.status_code == 200, reply.read()
        return [
            orjson.loads(line[6:])
            for line in reply.iter_lines()
            if line.startswith("data: ") and line != "data: [DONE]"
        ]


def no_markers(payload: Any) -> None:
    text = orjson.dumps(payload).decode()
    assert not [m for m in HARMONY_MARKERS if m in text], text


# --- out: harmony to the client's fields ---------------------------------------------------

DIALECTS = ["vllm-completions", "vllm-generate", "sglang", "llamacpp"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_upstream_s_harmony_answer_reaches_chat_as_fields(
    proxied: Proxied, dialect: str
) -> None:
    http, upstream = proxied(dialect)
    body = {"model": MODEL, "messages": [{"role": "user", "content": QUESTION}], "tools": [TOOL]}
    reply = http.post("/v1/chat/completions", json=body)
    chunks = streamed(http, "/v1/chat/completions", body)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    message = choice["message"]
    assert message["reasoning_content"] == THOUGHT and message["content"] is None
    assert [
        (c["function"]["name"], orjson.loads(c["function"]["arguments"]))
        for c in message["tool_calls"]
    ] == [("get_weather", {"city": "Paris"})]
    assert choice["finish_reason"] == "tool_calls"
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == THOUGHT
    assert not "".join(d.get("content") or "" for d in deltas)
    calls = [t for d in deltas for t in d.get("tool_calls") or ()]
    assert [(t["function"]["name"], t["function"]["arguments"]) for t in calls] == [
        ("get_weather", '{"city": "Paris"}')
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    no_markers(reply.json())
    no_markers(chunks)
    asked = upstream.requests[0]
    if dialect == "llamacpp":
        assert set(HARMONY_MARKERS[:7]) <= set(asked["preserved_tokens"])
    else:
        params = asked if dialect == "vllm-completions" else asked["sampling_params"]
        assert params["stop_token_ids"] == [CALL, RETURN]
        assert params.get("skip_special_tokens", False) is False


ANTHROPIC_TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather now.",
        "input_schema": TOOL["function"]["parameters"],
    }
]


def test_anthropic_gets_thinking_and_tool_use_blocks(proxied: Proxied) -> None:
    http, _ = proxied("vllm-completions")
    body = {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": QUESTION}],
        "tools": ANTHROPIC_TOOLS,
    }
    reply = http.post("/v1/messages", json=body)
    events = streamed(http, "/v1/messages", body)
    assert reply.status_code == 200, reply.text
    blocks = reply.json()["content"]
    assert [b["type"] for b in blocks] == ["thinking", "tool_use"]
    assert blocks[0]["thinking"] == THOUGHT
    assert (blocks[1]["name"], blocks[1]["input"]) == ("get_weather", {"city": "Paris"})
    assert reply.json()["stop_reason"] == "tool_use"
    started = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert started == ["thinking", "tool_use"]
    no_markers(reply.json())
    no_markers(events)


def test_every_split_of_the_stream_gives_the_same_answer(proxied: Proxied) -> None:
    """The same answer in pieces of every size from 1 to 9 characters: the same fields."""
    http, upstream = proxied("vllm-completions")
    body = {"model": MODEL, "messages": [{"role": "user", "content": QUESTION}], "tools": [TOOL]}
    seen = set()
    for size in range(1, 10):
        upstream.size = size
        chunks = streamed(http, "/v1/chat/completions", body)
        deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
        reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
        calls = tuple(
            (t["function"]["name"], t["function"]["arguments"])
            for d in deltas
            for t in d.get("tool_calls") or ()
        )
        seen.add((reasoning, calls))
    assert seen == {(THOUGHT, (("get_weather", '{"city": "Paris"}'),))}


# --- in: the reasoning a client sends back ------------------------------------------------


def test_codex_reasoning_items_come_back_as_the_analysis_channel(
    proxied: Proxied, gpt_oss: GptOss
) -> None:
    """Codex's second call resends the first answer's reasoning item and function call with
    the tool's output: the prompt shows the analysis channel and the call as gpt-oss wrote
    them (the template's form), the ids are the reference encode, and the call repairs."""
    http, upstream = proxied("vllm-completions")
    first = {
        "model": MODEL,
        "instructions": "Be brief.",
        "prompt_cache_key": "codex-1",
        "tools": [{"type": "function", **TOOL["function"]}],
        "input": [{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}],
    }
    reply = http.post("/v1/responses", json=first)
    assert reply.status_code == 200, reply.text
    output = reply.json()["output"]
    assert [item["type"] for item in output] == ["reasoning", "function_call"]
    assert output[0]["summary"][0]["text"] == THOUGHT
    no_markers(output)
    result = {"type": "function_call_output", "call_id": output[1]["call_id"], "output": "18 C"}
    second = first | {"input": [*first["input"], *output, result]}
    upstream.text = "<|channel|>final<|message|>Sunny, 18 C."
    again = http.post("/v1/responses", json=second)
    assert again.status_code == 200, again.text
    assert again.json()["output"][0]["content"][0]["text"] == "Sunny, 18 C."
    assert again.headers["x-toksplice-route"] in ("append", "edit")
    prompt = upstream.requests[1]["prompt"]
    text = gpt_oss.tokenizer.decode(prompt, skip_special_tokens=False)
    assert text.endswith(
        f"<|start|>user<|message|>{QUESTION}<|end|>"
        f"<|start|>assistant<|channel|>analysis<|message|>{THOUGHT}<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
        '{"city": "Paris"}<|call|>'
        "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
        '"18 C"<|end|><|start|>assistant'
    )
    assert prompt == gpt_oss.encode(gpt_oss.render(chat_body(second)))


def test_anthropic_thinking_blocks_come_back_as_the_analysis_channel(
    proxied: Proxied, gpt_oss: GptOss
) -> None:
    http, upstream = proxied("vllm-completions")
    upstream.text = "<|channel|>final<|message|>Sunny."
    turn = [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": THOUGHT, "signature": "sig"},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}],
        },
    ]
    body = {"model": MODEL, "max_tokens": 256, "tools": ANTHROPIC_TOOLS, "messages": turn}
    reply = http.post("/v1/messages", json=body)
    assert reply.status_code == 200, reply.text
    assert reply.json()["content"] == [{"type": "text", "text": "Sunny."}]
    text = gpt_oss.tokenizer.decode(upstream.requests[0]["prompt"], skip_special_tokens=False)
    assert (
        f"<|start|>assistant<|channel|>analysis<|message|>{THOUGHT}<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary json"
    ) in text


@pytest.mark.parametrize(
    ("item", "analysis"),
    [
        ({"content": [{"type": "reasoning_text", "text": THOUGHT}],
          "summary": [{"type": "summary_text", "text": "Weather."}]}, THOUGHT),
        ({"summary": [{"type": "summary_text", "text": THOUGHT}],
          "encrypted_content": "gAAAA-opaque"}, THOUGHT),
        ({"summary": [], "encrypted_content": "gAAAA-opaque"}, None),
    ],
)  # fmt: skip
def test_each_shape_of_reasoning_item_renders_as_gpt_oss_reads_it(
    gpt_oss: GptOss, item: dict[str, Any], analysis: str | None
) -> None:
    """The reasoning text when the item has it (its content, else its summary); an item
    with only ``encrypted_content`` (another server's, which no one here can read) renders
    no analysis."""
    body = {
        "model": MODEL,
        "tools": [{"type": "function", **TOOL["function"]}],
        "input": [
            {"role": "user", "content": QUESTION},
            {"type": "reasoning", "id": "rs_1", **item},
            {"type": "function_call", "call_id": "c1", "name": "get_weather",
             "arguments": '{"city": "Paris"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
        ],
    }  # fmt: skip
    text = gpt_oss.render(chat_body(body))
    call = "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
    shown = f"<|start|>assistant<|channel|>analysis<|message|>{analysis}<|end|>" if analysis else ""
    assert f"<|start|>user<|message|>{QUESTION}<|end|>{shown}{call}" in text
