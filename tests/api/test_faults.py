"""Faults, alignment and tool calls over real HTTP: client -> proxy -> a stand-in upstream.

Everything the real llama.cpp cannot be made to do (die mid-stream, stall, refuse, tokenize
differently, emit Qwen3 tool calls) is scripted in ``StubUpstream``; ids are always checked
against the reference encode of the template-rendered conversation.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from tokenizers import Tokenizer

from app.config import Settings
from app.main import create_app
from app.rendering import ChatTemplate
from tests.api.servers import StubUpstream, closed_port_url, dropping_front, serving

MODEL = "m"
HELLO = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}]}


@functools.cache
def reference(folder: Path) -> tuple[ChatTemplate, Tokenizer]:
    return (ChatTemplate.from_tokenizer_config(folder / "tokenizer_config.json"),
            Tokenizer.from_file(str(folder / "tokenizer.json")))


def rendered(folder: Path, body: dict[str, Any]) -> str:
    return reference(folder)[0].render(body["messages"], tools=body.get("tools"))


def expected_ids(folder: Path, body: dict[str, Any]) -> list[int]:
    ids: list[int] = reference(folder)[1].encode(rendered(folder, body),
                                                 add_special_tokens=False).ids
    return ids


@contextmanager
def proxy(upstream: str, folder: Path, **options: Any) -> Iterator[httpx.Client]:
    settings = Settings(upstream=upstream, tokenizer=folder, model=MODEL,
                        **{"alignment_check": False, **options})
    with serving(create_app(settings)) as url, httpx.Client(base_url=url, timeout=30) as http:
        yield http


def sse(reply: httpx.Response) -> list[str]:
    return [line[6:] for line in reply.iter_lines() if line.startswith("data: ")]


def assert_openai_error(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = reply.json()["error"]
    assert isinstance(error["message"], str) and error["message"]
    assert set(error) == {"message", "type", "param", "code"}, error  # OpenAI's shape
    assert error["type"] and (error["code"] is None or isinstance(error["code"], str))
    return error


# --- upstream faults -------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_down_is_502(smollm2_dir: Path, stream: bool) -> None:
    with proxy(closed_port_url(), smollm2_dir) as http:
        reply = http.post("/v1/chat/completions", json=HELLO | {"stream": stream})
        assert_openai_error(reply, 502)
        assert http.get("/health").status_code == 503


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("mode", "status", "fragment"),
                         [("error500", 502, "boom"), ("error400", 400, "prompt too long")])
def test_upstream_error_status(smollm2_dir: Path, stream: bool, mode: str, status: int,
                               fragment: str) -> None:
    stub = StubUpstream(mode=mode)
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http:
        reply = http.post("/v1/chat/completions", json=HELLO | {"stream": stream})
        assert fragment in assert_openai_error(reply, status)["message"]
    assert len(stub.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_stalled_upstream_is_504(smollm2_dir: Path, stream: bool) -> None:
    stub = StubUpstream(mode="stall")
    with stub.serve() as upstream, \
            proxy(upstream, smollm2_dir, read_timeout=0.5) as http:
        started = time.monotonic()
        reply = http.post("/v1/chat/completions", json=HELLO | {"stream": stream})
        assert_openai_error(reply, 504)
        assert time.monotonic() - started < 5


def test_failure_mid_stream_ends_with_error_event_then_done(smollm2_dir: Path) -> None:
    stub = StubUpstream(mode="die", pieces=["Hel", "lo", " never"])
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http, \
            http.stream("POST", "/v1/chat/completions", json=HELLO | {"stream": True}) as reply:
        assert reply.status_code == 200
        events = sse(reply)
    assert events[-1] == "[DONE]"
    *chunks, error = [orjson.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "Hello"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert not any(c["choices"][0]["finish_reason"] for c in chunks)
    assert error["error"]["message"] and error["error"]["type"] == "upstream_error"


def test_client_disconnect_cancels_the_upstream(smollm2_dir: Path) -> None:
    stub = StubUpstream(mode="slow")
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http:
        with http.stream("POST", "/v1/chat/completions",
                         json=HELLO | {"stream": True}) as reply:
            lines = reply.iter_lines()
            received = [line for line, _ in zip(lines, range(6), strict=False)]
            assert any('"x"' in line for line in received)
        assert stub.cancelled_flag.wait(5), "the upstream response was never cancelled"


def test_streamed_answers_reuse_the_upstream_connection(smollm2_dir: Path) -> None:
    """A streamed answer is read to its end, so its connection goes back to the pool: calls
    after it do not pay a new connect."""
    stub = StubUpstream()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http:
        for stream in (True, True, False, True):
            reply = http.post("/v1/chat/completions", json=body | {"stream": stream})
            assert reply.status_code == 200, reply.text
    assert len(stub.ports) == 4 and len(set(stub.ports)) == 1, stub.ports


@pytest.mark.parametrize("stream", [False, True])
def test_a_connection_closed_before_the_reply_is_retried_once(
    smollm2_dir: Path, stream: bool
) -> None:
    """The upstream closing a connection without replying (an idle keep-alive it dropped)
    costs one retry on a fresh connection, not a 502; a second such close is a 502."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    stub = StubUpstream()
    with stub.serve() as upstream:
        with dropping_front(upstream, 1) as front, proxy(front, smollm2_dir) as http:
            reply = http.post("/v1/chat/completions", json=body)
            assert reply.status_code == 200, reply.text
        with dropping_front(upstream, 2) as front, proxy(front, smollm2_dir) as http:
            assert http.post("/v1/chat/completions", json=body).status_code == 502
    assert len(stub.ports) == 1


def test_a_long_prompt_goes_upstream_in_slices_with_its_length_said(smollm2_dir: Path) -> None:
    """A prompt whose ids' JSON spans several send slices reaches the upstream whole, framed
    by Content-Length (not chunked: not every server takes chunked requests), and again
    whole when the first connection was dropped before the reply (the body is resent)."""
    words = " ".join(f"w{i}" for i in range(60_000))
    body = {"model": MODEL, "messages": [{"role": "user", "content": words}]}
    stub = StubUpstream()
    with (
        stub.serve() as upstream,
        dropping_front(upstream, 1) as front,
        proxy(front, smollm2_dir) as http,
    ):
        reply = http.post("/v1/chat/completions", json=body)
        assert reply.status_code == 200, reply.text
    want = expected_ids(smollm2_dir, body)
    assert len(orjson.dumps(want)) > 2 * (256 << 10)
    assert [r["prompt"] for r in stub.requests] == [want]
    sent = stub.headers[0]
    assert "transfer-encoding" not in sent
    assert int(sent["content-length"]) == len(orjson.dumps(stub.requests[0]))


@pytest.mark.parametrize("chunked", [False, True])
def test_body_over_limit_is_413(smollm2_dir: Path, chunked: bool) -> None:
    stub = StubUpstream()
    body = orjson.dumps({"model": MODEL,
                         "messages": [{"role": "user", "content": "x" * 5000}]})
    with stub.serve() as upstream, proxy(upstream, smollm2_dir, max_body_bytes=2048) as http:
        content: Any = iter([body[:1000], body[1000:]]) if chunked else body
        reply = http.post("/v1/chat/completions", content=content,
                          headers={"content-type": "application/json"})
        assert ("content-length" in reply.request.headers) is not chunked
        assert_openai_error(reply, 413)
        small = http.post("/v1/chat/completions", json=HELLO)
        assert small.status_code == 200, small.text
    assert len(stub.requests) == 1


def test_concurrent_sessions_send_exact_ids(smollm2_dir: Path) -> None:
    stub = StubUpstream()
    bodies = []
    for session in range(12):
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"Agent {session}."}]
        for turn in range(4):
            messages = [*messages, {"role": "user", "content": f"s{session} turn {turn}: ls -la"
                                    f" {'src/ ' * turn}and tell me {session * turn}"}]
            bodies.append(({"x-session-id": f"s{session}"},
                           {"model": MODEL, "messages": messages, "stream": turn % 2 == 1}))
            messages = [*messages, {"role": "assistant", "content": f"Done {turn}. café ✓"}]
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http:
        def call(item: tuple[dict[str, str], dict[str, Any]]) -> int:
            reply = http.post("/v1/chat/completions", json=item[1], headers=item[0])
            return reply.status_code
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(call, bodies)) == {200}
    sent = sorted(tuple(r["prompt"]) for r in stub.requests)
    assert sent == sorted(tuple(expected_ids(smollm2_dir, b)) for _, b in bodies)


# --- alignment check -------------------------------------------------------------------


def _aligned(folder: Path, wrong: bool) -> StubUpstream:
    tokenizer = reference(folder)[1]

    def tokenize(text: str) -> list[int]:
        ids: list[int] = tokenizer.encode(text, add_special_tokens=False).ids
        return ids[::-1] if wrong else ids
    return StubUpstream(tokenize=tokenize)


def test_alignment_mismatch_sends_text(smollm2_dir: Path) -> None:
    stub = _aligned(smollm2_dir, wrong=True)
    with stub.serve() as upstream, proxy(upstream, smollm2_dir, alignment_check=True) as http:
        assert http.get("/health").json()["sending"] == "text"
        assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
    assert stub.tokenized, "the alignment check never asked the upstream"
    assert stub.requests[-1]["prompt"] == rendered(smollm2_dir, HELLO)


def test_alignment_match_sends_ids(smollm2_dir: Path) -> None:
    stub = _aligned(smollm2_dir, wrong=False)
    with stub.serve() as upstream, proxy(upstream, smollm2_dir, alignment_check=True) as http:
        assert http.get("/health").json()["sending"] == "token ids"
        assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
    assert len(stub.tokenized) >= 2
    assert stub.requests[-1]["prompt"] == expected_ids(smollm2_dir, HELLO)


def test_alignment_without_tokenize_sends_ids_and_warns(
        smollm2_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    stub = StubUpstream(tokenize=None)
    with caplog.at_level(logging.WARNING, logger="toksplice"), stub.serve() as upstream, \
            proxy(upstream, smollm2_dir, alignment_check=True) as http:
        assert http.get("/health").json()["sending"] == "token ids"
        assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
    assert stub.requests[-1]["prompt"] == expected_ids(smollm2_dir, HELLO)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING
                and r.name == "toksplice" and "/tokenize" in r.getMessage()]
    assert warnings, [r.getMessage() for r in caplog.records]


# --- tool calls and reasoning (Qwen3) ---------------------------------------------------

BASH = {"type": "function", "function": {
    "name": "Bash", "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}}}
QWEN3_OUTPUT = ('<think>\nplan\n</think>\n\nI\'ll look.<tool_call>\n{"name": "Bash", '
                '"arguments": {"command": "ls"}}\n</tool_call>')
AWKWARD = [QWEN3_OUTPUT[a:b] for a, b in zip(
    [0, 1, 3, 9, 14, 17, 19, 24, 31, 33, 41, 50, 63, 80, 95],
    [1, 3, 9, 14, 17, 19, 24, 31, 33, 41, 50, 63, 80, 95, None], strict=True)]


@pytest.fixture(scope="module")
def qwen3_dir(assets: dict[str, Path]) -> Path:
    return assets["qwen3"].parent


def test_awkward_chunks_cover_the_output() -> None:
    assert "".join(AWKWARD) == QWEN3_OUTPUT
    assert any("<tool" in p and "<tool_call>" not in p for p in AWKWARD)  # split mid-tag


def test_tool_call_and_reasoning_stream(qwen3_dir: Path) -> None:
    stub = StubUpstream(pieces=AWKWARD)
    body = {"model": MODEL, "tools": [BASH], "stream": True,
            "messages": [{"role": "user", "content": "What files are here?"}]}
    with stub.serve() as upstream, proxy(upstream, qwen3_dir, tool_format="hermes") as http, \
            http.stream("POST", "/v1/chat/completions", json=body) as reply:
        assert reply.status_code == 200
        events = sse(reply)
    assert events[-1] == "[DONE]"
    assert stub.requests[0]["prompt"] == expected_ids(qwen3_dir, body)
    deltas = [orjson.loads(e)["choices"][0] for e in events[:-1]]
    reasoning = "".join(d["delta"].get("reasoning_content") or "" for d in deltas)
    content = "".join(d["delta"].get("content") or "" for d in deltas)
    assert reasoning.strip() == "plan" and "<think>" not in reasoning
    assert content.strip() == "I'll look."
    calls = [c for d in deltas for c in d["delta"].get("tool_calls") or []]
    assert calls and all(c["index"] == 0 for c in calls)
    assert calls[0]["id"] and calls[0]["type"] == "function"
    assert calls[0]["function"]["name"] == "Bash"
    assert all("id" not in c for c in calls[1:])
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert orjson.loads(arguments) == {"command": "ls"}
    assert [d["finish_reason"] for d in deltas if d["finish_reason"]] == ["tool_calls"]


def test_tool_call_and_reasoning_message(qwen3_dir: Path) -> None:
    stub = StubUpstream(pieces=AWKWARD)
    body = {"model": MODEL, "tools": [BASH],
            "messages": [{"role": "user", "content": "What files are here?"}]}
    with stub.serve() as upstream, proxy(upstream, qwen3_dir, tool_format="hermes") as http:
        reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    message = choice["message"]
    assert choice["finish_reason"] == "tool_calls"
    assert message["reasoning_content"].strip() == "plan"
    assert message["content"].strip() == "I'll look."
    (call,) = message["tool_calls"]
    assert call["id"] and call["type"] == "function" and call["function"]["name"] == "Bash"
    assert orjson.loads(call["function"]["arguments"]) == {"command": "ls"}


def test_tool_history_renders_like_transformers(qwen3_dir: Path) -> None:
    transformers = pytest.importorskip("transformers")
    call = {"id": "call_1", "type": "function",
            "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "What files are here?"},
        {"role": "assistant", "content": "I'll look.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "README.md\napp\n"},
        {"role": "assistant", "content": "README.md and app."},
        {"role": "user", "content": "Thanks."},
    ]
    body = {"model": MODEL, "tools": [BASH], "messages": messages}
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, qwen3_dir, tool_format="hermes") as http:
        reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    # vLLM's semantics: arguments JSON strings become objects before transformers renders.
    seen = [dict(m, tool_calls=[dict(call, function={"name": "Bash",
                                                     "arguments": {"command": "ls"}})])
            if "tool_calls" in m else m for m in messages]
    hf = transformers.AutoTokenizer.from_pretrained(str(qwen3_dir))
    text = hf.apply_chat_template(seen, tools=[BASH], add_generation_prompt=True,
                                  tokenize=False)
    assert text == rendered(qwen3_dir, body)
    assert '{"name": "Bash", "arguments": {"command": "ls"}}' in text
    assert "<tool_response>\nREADME.md\napp\n\n</tool_response>" in text
    ids = reference(qwen3_dir)[1].encode(text, add_special_tokens=False).ids
    assert stub.requests[0]["prompt"] == ids
