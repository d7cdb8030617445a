"""Every dialect of ``app.config.DIALECTS`` over real HTTP, against a stand-in that speaks
that upstream's own API (paths, fields and stream shapes as the servers document them).

Checked: the path, the ids at the dialect's key (exactly the reference encode of the rendered
conversation), the sampling parameters under the upstream's names, and the OpenAI answer
(streamed and whole) with its usage.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
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

from app.config import DIALECTS, Settings
from app.generation import Sampling
from app.main import create_app
from app.rendering import ChatTemplate
from app.upstream import Prompt, UpstreamCall, dialect_named
from tests.api.servers import serving

MODEL = "m"
OUTPUT = "Hi there, café ✓ 日本."
"""What every stand-in generates; byte-level tokens split ✓ and 日 across tokens."""
PROMPT_TOKENS_CACHED = 3
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Greet me in two languages."}]
SAMPLING = {"max_tokens": 7, "temperature": 0.3, "top_p": 0.9, "stop": ["\n\n"], "seed": 42}


def sampling(dialect: str) -> dict[str, Any]:
    """What each dialect's calls ask for: no stop sequence for "llamacpp", whose calls with
    one go to llama.cpp's own API (tested as "llamacpp-completion")."""
    return {k: v for k, v in SAMPLING.items() if dialect != "llamacpp" or k != "stop"}

PATHS = {"llamacpp": "/v1/completions", "vllm-completions": "/v1/completions",
         "vllm-chat": "/v1/chat/completions", "vllm-generate": "/inference/v1/generate",
         "sglang": "/generate", "llamacpp-completion": "/completion"}
FINISH = {"llamacpp": "stop", "vllm-completions": "length", "vllm-chat": "stop",
          "vllm-generate": "length", "sglang": "length", "llamacpp-completion": "length"}
"""The finish reason each stand-in reports (in its own spelling), in OpenAI terms."""


@functools.cache
def tokenizer(folder: Path) -> Tokenizer:
    return Tokenizer.from_file(str(folder / "tokenizer.json"))


def expected_ids(folder: Path) -> list[int]:
    template = ChatTemplate.from_tokenizer_config(folder / "tokenizer_config.json")
    ids: list[int] = tokenizer(folder).encode(template.render(MESSAGES),
                                              add_special_tokens=False).ids
    return ids


def pieces(text: str, sizes: tuple[int, ...] = (1, 4, 2, 7, 3)) -> list[str]:
    out, at, k = [], 0, 0
    while at < len(text):
        out.append(text[at:at + sizes[k % len(sizes)]])
        at, k = at + sizes[k % len(sizes)], k + 1
    return out


def sse(*payloads: Any, done: bool = True) -> AsyncIterator[bytes]:
    async def events() -> AsyncIterator[bytes]:
        for payload in payloads:
            yield b"data: " + orjson.dumps(payload) + b"\n\n"
        if done:
            yield b"data: [DONE]\n\n"
    return events()


def n_ids(prompt: Any) -> int:
    """Prompt tokens of an id-list prompt (a text prompt counts 0 here)."""
    return len(prompt) if isinstance(prompt, list) else 0


@dataclass
class StandIn:
    """One upstream server's API, answering ``OUTPUT`` (``output_ids`` for tokens-out)."""

    dialect: str
    output_ids: list[int]
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    abort: bool = False
    """SGLang: fail the request the way SGLang does (finish_reason type "abort")."""

    def app(self) -> Starlette:
        routes = {"/v1/completions": self._completions, "/completion": self._llamacpp,
                  "/v1/chat/completions": self._chat, "/inference/v1/generate": self._generate,
                  "/generate": self._sglang}
        return Starlette(routes=[
            *(Route(p, self._recorded(h), methods=["POST"]) for p, h in routes.items()),
            Route("/tokenize", self._tokenize, methods=["POST"])])

    async def _tokenize(self, request: Request) -> Response:
        """A tokenizer that disagrees with ours: one id per character."""
        body = orjson.loads(await request.body())
        text = body["content"] if self.dialect.startswith("llamacpp") else body["prompt"]
        return JSONResponse({"tokens": [ord(c) for c in text]})

    def _recorded(self, handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            body = orjson.loads(await request.body())
            self.requests.append((request.url.path, body))
            result: Response = await handler(body)
            return result
        return endpoint

    @staticmethod
    def _stream(events: AsyncIterator[bytes]) -> Response:
        return StreamingResponse(events, media_type="text/event-stream")

    async def _completions(self, body: dict[str, Any]) -> Response:
        """OpenAI completions: llama.cpp puts usage on the finish chunk, vLLM after it."""
        n = n_ids(body.get("prompt"))
        vllm = self.dialect == "vllm-completions"
        reason = FINISH[self.dialect]
        usage = {"prompt_tokens": n, "completion_tokens": 5, "total_tokens": n + 5,
                 "prompt_tokens_details": {"cached_tokens": PROMPT_TOKENS_CACHED}}
        if not body["stream"]:
            return JSONResponse({"id": "cmpl-1", "object": "text_completion", "model": MODEL,
                                 "choices": [{"index": 0, "text": OUTPUT,
                                              "finish_reason": reason}], "usage": usage})
        chunks: list[dict[str, Any]] = [
            {"object": "text_completion", "choices": [{"index": 0, "text": p,
                                                        "finish_reason": None}]}
            for p in pieces(OUTPUT)]
        chunks.append({"choices": [{"index": 0, "text": "", "finish_reason": reason}]})
        if body.get("stream_options", {}).get("include_usage"):
            if vllm:
                chunks.append({"choices": [], "usage": usage})
            else:
                chunks[-1]["usage"] = usage
        return self._stream(sse(*chunks))

    async def _llamacpp(self, body: dict[str, Any]) -> Response:
        """llama.cpp's /completion: ``content`` pieces; the last has ``stop`` and timings."""
        n = n_ids(body.get("prompt"))
        last = {"content": "", "stop": True, "stop_type": "limit", "tokens_predicted": 5,
                "tokens_evaluated": n, "timings": {"cache_n": PROMPT_TOKENS_CACHED,
                                                   "prompt_n": n - PROMPT_TOKENS_CACHED}}
        if not body["stream"]:
            return JSONResponse(last | {"content": OUTPUT})
        chunks = [{"content": p, "stop": False} for p in pieces(OUTPUT)]
        return self._stream(sse(*chunks, last, done=False))

    async def _chat(self, body: dict[str, Any]) -> Response:
        """vLLM chat: already OpenAI chat; the proxy passes it through."""
        n = n_ids((body.get("kv_transfer_params") or {}).get("prompt_token_ids"))
        usage = {"prompt_tokens": n, "completion_tokens": 5, "total_tokens": n + 5}
        head = {"id": "chatcmpl-up", "created": 1, "model": "upstream-name"}
        if not body["stream"]:
            return JSONResponse(head | {"object": "chat.completion", "usage": usage,
                                        "choices": [{"index": 0, "finish_reason": "stop",
                                                     "message": {"role": "assistant",
                                                                 "content": OUTPUT}}]})
        chunk = head | {"object": "chat.completion.chunk"}
        chunks = [chunk | {"choices": [{"index": 0, "delta": {"role": "assistant"},
                                        "finish_reason": None}]}]
        chunks += [chunk | {"choices": [{"index": 0, "delta": {"content": p},
                                         "finish_reason": None}]} for p in pieces(OUTPUT)]
        chunks.append(chunk | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        chunks.append(chunk | {"choices": [], "usage": usage})
        return self._stream(sse(*chunks))

    async def _generate(self, body: dict[str, Any]) -> Response:
        """vLLM tokens in, tokens out: ``choices[].token_ids`` deltas, one token each."""
        n = len(body["token_ids"])
        ids = self.output_ids
        usage = {"prompt_tokens": n, "completion_tokens": len(ids),
                 "total_tokens": n + len(ids),
                 "prompt_tokens_details": {"cached_tokens": PROMPT_TOKENS_CACHED}}
        if not body["stream"]:
            return JSONResponse({"request_id": "r", "usage": usage, "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": "length"}]})
        chunks: list[dict[str, Any]] = [
            {"request_id": "r", "choices": [{"index": 0, "token_ids": [t],
                                             "finish_reason": None}]} for t in ids]
        chunks[-1]["choices"][0]["finish_reason"] = "length"
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({"request_id": "r", "choices": [], "usage": usage})
        return self._stream(sse(*chunks))

    async def _sglang(self, body: dict[str, Any]) -> Response:
        """SGLang /generate: cumulative ``text``; ``meta_info`` counts and finish reason."""
        n = n_ids(body.get("input_ids"))
        meta = {"prompt_tokens": n, "completion_tokens": 5,
                "cached_tokens": PROMPT_TOKENS_CACHED, "id": "rid"}
        last = {"text": OUTPUT, "meta_info": meta | {"finish_reason": {
            "type": "length", "length": 7}}}
        if self.abort:
            last["meta_info"]["finish_reason"] = {
                "type": "abort", "message": "KV cache pool is full", "status_code": 503}
        if not body["stream"]:
            return JSONResponse(last)
        chunks, text = [], ""
        for piece in pieces(OUTPUT):
            text += piece
            chunks.append({"text": text, "meta_info": meta | {"finish_reason": None}})
        chunks[-1] = last
        return self._stream(sse(*chunks))


@contextmanager
def proxy(folder: Path, dialect: str, *, alignment_check: bool = False,
          abort: bool = False) -> Iterator[tuple[httpx.Client, StandIn]]:
    stand_in = StandIn(dialect, output_ids(folder), abort=abort)
    with serving(stand_in.app()) as upstream:
        settings = Settings(upstream=upstream, tokenizer=folder, model=MODEL, dialect=dialect,
                            alignment_check=alignment_check, tool_format=None)
        with serving(create_app(settings)) as url, \
                httpx.Client(base_url=url, timeout=30) as http:
            yield http, stand_in


@pytest.fixture(scope="module", params=DIALECTS)
def upstream(request: pytest.FixtureRequest,
             smollm2_dir: Path) -> Iterator[tuple[str, httpx.Client, StandIn]]:
    with proxy(smollm2_dir, request.param) as (http, stand_in):
        yield request.param, http, stand_in


def test_every_dialect_has_a_stand_in() -> None:
    assert set(DIALECTS) == set(PATHS) == set(FINISH)


def _chat(
    http: httpx.Client, stream: bool, dialect: str
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    body = {"model": MODEL, "messages": MESSAGES, "stream": stream, **sampling(dialect)}
    if stream:
        body["stream_options"] = {"include_usage": True}
        with http.stream("POST", "/v1/chat/completions", json=body) as reply:
            events = [line[6:] for line in reply.iter_lines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        return reply, [orjson.loads(e) for e in events[:-1]]
    reply = http.post("/v1/chat/completions", json=body)
    return reply, [reply.json()]


def check_request(dialect: str, path: str, body: dict[str, Any], ids: list[int],
                  stream: bool) -> None:
    assert path == PATHS[dialect]
    assert body["stream"] is stream
    s = sampling(dialect)
    if dialect in ("llamacpp", "vllm-completions"):
        assert body["prompt"] == ids and body["model"] == MODEL
        assert {k: body[k] for k in s} == s
        assert not stream or body["stream_options"] == {"include_usage": True}
    elif dialect == "vllm-chat":
        assert body["kv_transfer_params"]["prompt_token_ids"] == ids
        assert body["messages"] == MESSAGES and body["model"] == MODEL
        assert {k: body[k] for k in s} == s
    elif dialect == "vllm-generate":
        assert body["token_ids"] == ids and body["model"] == MODEL
        assert body["sampling_params"] == s
        assert not stream or body["stream_options"] == {"include_usage": True}
    elif dialect == "sglang":
        assert body["input_ids"] == ids
        params = body["sampling_params"]
        assert params == {"max_new_tokens": 7, "temperature": 0.3, "top_p": 0.9,
                          "stop": ["\n\n"], "sampling_seed": 42}
    else:
        assert dialect == "llamacpp-completion"
        assert body["prompt"] == ids and body["cache_prompt"] is True
        assert {k: body[k] for k in ("n_predict", "temperature", "top_p", "stop", "seed")} == {
            "n_predict": 7, "temperature": 0.3, "top_p": 0.9, "stop": ["\n\n"], "seed": 42}


def expected_usage(dialect: str, n_ids: int, folder: Path) -> dict[str, Any]:
    completion = len(output_ids(folder)) if dialect == "vllm-generate" else 5
    usage: dict[str, Any] = {"prompt_tokens": n_ids, "completion_tokens": completion,
                             "total_tokens": n_ids + completion}
    if dialect != "vllm-chat":
        usage["prompt_tokens_details"] = {"cached_tokens": PROMPT_TOKENS_CACHED}
    return usage


def output_ids(folder: Path) -> list[int]:
    ids: list[int] = tokenizer(folder).encode(OUTPUT, add_special_tokens=False).ids
    return ids


def test_whole_answer(upstream: tuple[str, httpx.Client, StandIn], smollm2_dir: Path) -> None:
    dialect, http, stand_in = upstream
    reply, (answer,) = _chat(http, stream=False, dialect=dialect)
    assert reply.status_code == 200, reply.text
    ids = expected_ids(smollm2_dir)
    check_request(dialect, *stand_in.requests[-1], ids, stream=False)
    assert answer["object"] == "chat.completion" and answer["model"] == MODEL
    (choice,) = answer["choices"]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == OUTPUT
    assert choice["finish_reason"] == FINISH[dialect]
    assert answer["usage"] == expected_usage(dialect, len(ids), smollm2_dir)


def test_streamed_answer(upstream: tuple[str, httpx.Client, StandIn],
                         smollm2_dir: Path) -> None:
    dialect, http, stand_in = upstream
    reply, chunks = _chat(http, stream=True, dialect=dialect)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    check_request(dialect, *stand_in.requests[-1], expected_ids(smollm2_dir), stream=True)
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == MODEL for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    choices = [c["choices"][0] for c in chunks if c["choices"]]
    assert choices[0]["delta"]["role"] == "assistant"
    assert "".join(c["delta"].get("content") or "" for c in choices) == OUTPUT
    finish = [c["finish_reason"] for c in choices]
    assert finish[-1] == FINISH[dialect] and not any(finish[:-1])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_streamed_usage(dialect: str, smollm2_dir: Path) -> None:
    with proxy(smollm2_dir, dialect) as (http, _):
        _, chunks = _chat(http, stream=True, dialect=dialect)
    assert chunks[-1]["choices"] == []
    n = len(expected_ids(smollm2_dir))
    assert chunks[-1]["usage"] == expected_usage(dialect, n, smollm2_dir)


TEXT_KEYS = {"llamacpp": "prompt", "vllm-completions": "prompt", "llamacpp-completion": "prompt",
             "sglang": "text"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mismatched_upstream_gets_text(dialect: str, smollm2_dir: Path) -> None:
    """After a failed alignment check the rendered text goes at the upstream's text key."""
    with proxy(smollm2_dir, dialect, alignment_check=True) as (http, stand_in):
        assert http.get("/health").json()["sending"] == "text"
        reply, (answer,) = _chat(http, stream=False, dialect=dialect)
    template = ChatTemplate.from_tokenizer_config(smollm2_dir / "tokenizer_config.json")
    text = template.render(MESSAGES)
    if dialect == "vllm-generate":  # tokens only: refuse rather than send wrong ids
        assert reply.status_code == 502 and "vllm-completions" in answer["error"]["message"]
        assert stand_in.requests == []
        return
    assert reply.status_code == 200, reply.text
    ((_, body),) = stand_in.requests
    if dialect == "vllm-chat":  # vLLM renders the forwarded messages itself
        assert "kv_transfer_params" not in body and body["messages"] == MESSAGES
    else:
        assert body[TEXT_KEYS[dialect]] == text and "input_ids" not in body


@pytest.mark.parametrize("stream", [False, True])
def test_sglang_abort_is_an_error(stream: bool, smollm2_dir: Path) -> None:
    with proxy(smollm2_dir, "sglang", abort=True) as (http, _):
        reply, events = _chat(http, stream=stream, dialect="sglang")
    if not stream:
        assert reply.status_code == 502
        assert "KV cache pool is full" in events[0]["error"]["message"]
        return
    assert "KV cache pool is full" in events[-1]["error"]["message"]
    assert not any(c["choices"][0]["finish_reason"] for c in events[:-1] if c.get("choices"))


def test_sglang_passes_logit_bias() -> None:
    from app.generation import Sampling
    from app.upstream import Prompt, UpstreamCall, dialect_named

    call = UpstreamCall(model=MODEL, prompt=Prompt(b"1,2", 2, "ab"), stream=False,
                        sampling=Sampling(logit_bias={"5": -100.0}))
    path, body = dialect_named("sglang").request(call)
    assert path == "/generate"
    assert orjson.loads(bytes(body)) == {"input_ids": [1, 2], "stream": False,
                                  "sampling_params": {"max_new_tokens": None,
                                                      "logit_bias": {"5": -100.0}}}


@pytest.mark.parametrize(
    ("dialect", "payload", "stop"),
    [
        ("llamacpp", {"content": "", "stop": True, "stop_type": "word", "stopping_word": "END"},
         "END"),
        ("llamacpp", {"content": "", "stop": True, "stop_type": "eos", "stopping_word": ""}, None),
        ("llamacpp", {"choices": [{"text": "", "finish_reason": "stop"}]}, None),
        ("vllm-completions",
         {"choices": [{"text": "", "finish_reason": "stop", "stop_reason": "END"}]}, "END"),
        ("vllm-completions",
         {"choices": [{"text": "", "finish_reason": "stop", "stop_reason": 151645}]}, None),
        ("vllm-generate",
         {"choices": [{"token_ids": [1], "finish_reason": "stop", "stop_reason": "END"}]}, "END"),
        ("sglang", {"text": "", "meta_info": {"finish_reason": {"type": "stop", "matched": "END"}}},
         "END"),
        ("sglang", {"text": "", "meta_info": {"finish_reason": {"type": "stop", "matched": 2}}},
         None),
    ],
)
def test_the_stop_sequence_that_ended_the_text(
    dialect: str, payload: dict[str, Any], stop: str | None
) -> None:
    """Where an upstream names the stop string that ended the output, the proxy keeps it (a
    stop token id is not a stop sequence)."""
    generated = dialect_named(dialect).event(payload, 3)
    assert generated.finish_reason == "stop" and generated.stop_sequence == stop


def test_llamacpp_sends_calls_with_stop_sequences_to_its_own_api() -> None:
    call = UpstreamCall(
        model="m", prompt=Prompt(ids_json=b"1,2", n_ids=2, text="ab"),
        sampling=Sampling(max_tokens=5, stop=["END"]), stream=True,
    )
    path, body = dialect_named("llamacpp").request(call)
    sent = orjson.loads(bytes(body))
    assert path == "/completion" and sent["prompt"] == [1, 2] and sent["stop"] == ["END"]
    assert sent["n_predict"] == 5
    plain = UpstreamCall(model="m", prompt=call.prompt, sampling=Sampling(), stream=True)
    assert dialect_named("llamacpp").request(plain)[0] == "/v1/completions"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_ids_json_goes_into_the_body_uncopied(dialect: str) -> None:
    """The request body holds the prompt's ids' JSON itself, not a copy joined with the rest
    (megabytes at 1M characters); joined, it is the JSON the upstream reads."""
    ids_json = memoryview(b"1,2,3")
    call = UpstreamCall(model="m", prompt=Prompt(ids_json, 3, "abc"), sampling=Sampling(),
                        stream=True, chat_body={"model": "m", "messages": []})
    body = dialect_named(dialect).request(call)[1]
    assert any(part is ids_json for part in body.parts)
    assert orjson.dumps(orjson.loads(bytes(body))) == bytes(body) and len(body) == len(bytes(body))
    assert b"[1,2,3]" in bytes(body)
