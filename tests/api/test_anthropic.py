"""The Anthropic Messages API over real HTTP, with the official ``anthropic`` SDK as client.

(a) against the real llama.cpp server (SmolLM2): a Claude-Code-shaped session (billing line,
tools, tool_use / tool_result history) turn by turn, streamed and not; every prompt sent
upstream equals the reference encode of the rendered canonical request.  (b) against a
stand-in upstream speaking Qwen3 (``<think>`` and a Hermes ``<tool_call>``) through the real
Qwen3 template: the SDK sees thinking, text and tool_use blocks, in the exact event order.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest
from anthropic.types import TextBlock, ThinkingBlock, ToolUseBlock
from tokenizers import Tokenizer

from app.config import Settings
from app.main import create_app
from app.protocol.anthropic_reply import signature
from app.protocol.anthropic_request import to_chat_body
from app.rendering import ChatTemplate
from app.tools.local_upstream import LocalLlamaServer
from tests.api.servers import RecordingTransport, StubUpstream, closed_port_url, serving

FIXTURES = Path(__file__).parent / "fixtures"
SESSION = "anthropic_claude_code_session.json"
SUBAGENT = "anthropic_subagent.json"


def fixture(name: str, model: str) -> dict[str, Any]:
    body: dict[str, Any] = orjson.loads((FIXTURES / name).read_bytes())
    return body | {"model": model}


@functools.cache
def reference(folder: Path) -> tuple[ChatTemplate, Tokenizer]:
    return (ChatTemplate.from_tokenizer_config(folder / "tokenizer_config.json"),
            Tokenizer.from_file(str(folder / "tokenizer.json")))


def rendered(folder: Path, body: dict[str, Any], **options: Any) -> str:
    chat = to_chat_body(body, **options).body
    return reference(folder)[0].render(chat["messages"], tools=chat.get("tools"),
                                       chat_template_kwargs=chat.get("chat_template_kwargs"))


def expected_ids(folder: Path, body: dict[str, Any], **options: Any) -> list[int]:
    ids: list[int] = reference(folder)[1].encode(rendered(folder, body, **options),
                                                 add_special_tokens=False).ids
    return ids


def turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The session's calls: the transcript up to each user message, a fresh billing line
    (Claude Code's ``cch`` changes every call) and a short answer."""
    calls = []
    for k, message in enumerate(body["messages"]):
        if message["role"] != "user":
            continue
        call = copy.deepcopy(body) | {"messages": body["messages"][: k + 1], "max_tokens": 4,
                                      "temperature": 0.0}
        call["system"][0]["text"] = re.sub(r"cch=\w+", f"cch={k:05x}", call["system"][0]["text"])
        calls.append(call)
    return calls


def create_args(body: dict[str, Any]) -> dict[str, Any]:
    """SDK keyword arguments for ``body`` (this SDK has no sampling parameters: extra_body)."""
    sampling = {k: body[k] for k in ("temperature", "top_p", "top_k") if k in body}
    args = {k: v for k, v in body.items() if k != "stream" and k not in sampling}
    return args | {"extra_body": sampling} if sampling else args


def usage_total(usage: Any) -> int:
    return int(usage.input_tokens + (usage.cache_read_input_tokens or 0))


@contextmanager
def stub_proxy(upstream: str, folder: Path, **options: Any) -> Iterator[str]:
    settings = Settings(upstream=upstream, tokenizer=folder, model="m",
                        **{"alignment_check": False, **options})
    with serving(create_app(settings)) as url:
        yield url


def sdk(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0, timeout=60)


def sse_events(reply: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    events, name = [], ""
    for line in reply.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, orjson.loads(line[6:])))
    return events


# --- the request translation, literally -------------------------------------------------


def test_translation_of_every_block_kind() -> None:
    body = {
        "model": "m", "max_tokens": 100, "stop_sequences": ["###"], "top_k": 5,
        "thinking": {"type": "disabled"}, "metadata": {"user_id": "u"},
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cch=1;\nBe brief."},
                   {"type": "text", "text": "Use tools.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "Bash", "description": "Run.", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"},
                                         {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Running."},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                 "content": [{"type": "text", "text": "no"}, {"type": "text", "text": "such"}]},
                {"type": "text", "text": "go on"}]},
        ],
    }
    chat = to_chat_body(body, strip_billing_line=True).body
    assert chat == {
        "model": "m", "max_tokens": 100, "stream": False,
        "stream_options": {"include_usage": True}, "stop": ["###"], "top_k": 5,
        "chat_template_kwargs": {"enable_thinking": False},
        "tool_choice": "required", "parallel_tool_calls": False,
        "tools": [{"type": "function", "function": {
            "name": "Bash", "description": "Run.", "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."},
                                           {"type": "text", "text": "Use tools."}]},
            {"role": "user", "content": [{"type": "text", "text": "a"},
                                         {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "Running.", "reasoning_content": "hmm",
             "tool_calls": [{"id": "toolu_1", "type": "function",
                             "function": {"name": "Bash", "arguments": '{"command":"ls"}'}}]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: no\nsuch"},
            {"role": "user", "content": [{"type": "text", "text": "go on"}]},
        ],
    }
    # messages[:2] came parsed before: system + user + assistant are validated chat messages
    assert to_chat_body(body, reused_messages=2).validated == 3
    assert to_chat_body(body, reused_messages=3).validated == 5
    assert to_chat_body(body).validated == 0
    kept = to_chat_body(body).body["messages"][0]["content"][0]["text"]
    assert kept.startswith("x-anthropic-billing-header: cch=1;\n")


# --- (a) the real llama.cpp server --------------------------------------------------------


class Llama:
    def __init__(self, url: str, transport: RecordingTransport, upstream: str,
                 folder: Path) -> None:
        self.url, self.transport, self.upstream, self.folder = url, transport, upstream, folder
        self.client = sdk(url)

    def expected(self, body: dict[str, Any], **options: Any) -> list[int]:
        ids = expected_ids(self.folder, body, **options)
        text = rendered(self.folder, body, **options)
        upstream = httpx.post(self.upstream + "/tokenize", timeout=60, json={
            "content": text, "add_special": False, "parse_special": True}).json()["tokens"]
        assert ids == upstream, "reference and llama.cpp disagree on the rendered text"
        return ids


@pytest.fixture(scope="module")
def llama(llama_server: LocalLlamaServer, smollm2_dir: Path) -> Iterator[Llama]:
    transport = RecordingTransport()
    # no periodic alignment re-check (tests/upstream/test_realignment.py): its /tokenize
    # calls would land among the recorded requests of a module that runs past 300 s
    settings = Settings(upstream=llama_server.url, tokenizer=smollm2_dir, model="smollm2",
                        alignment_recheck_s=0)
    with serving(create_app(settings, transport=transport)) as url:
        yield Llama(url, transport, llama_server.url, smollm2_dir)


def test_claude_code_session_sends_exact_ids(llama: Llama) -> None:
    session = {"x-claude-code-session-id": "7c0e-anthropic-e2e"}
    routes = []
    calls = turns(fixture(SESSION, "smollm2"))
    # the billing line is an edit at the start: llama.cpp prefills all of every call
    for k, body in enumerate(calls[i] for i in (0, 1, 4, 7)):
        before = len(llama.transport.sent)
        if k % 2:
            with llama.client.messages.stream(**create_args(body),
                                              extra_headers=session) as stream:
                message = stream.get_final_message()
                headers = stream.response.headers
        else:
            raw = llama.client.messages.with_raw_response.create(**create_args(body),
                                                                 extra_headers=session)
            message, headers = raw.parse(), raw.headers
        routes.append(headers["x-toksplice-route"])
        (path, sent), = llama.transport.sent[before:]
        expected = llama.expected(body)
        assert path == "/v1/completions" and sent["prompt"] == expected
        assert sent["max_tokens"] == 4
        assert message.type == "message" and message.role == "assistant"
        assert message.id.startswith("msg_") and message.model == "smollm2"
        assert message.stop_reason in ("end_turn", "max_tokens")
        (answer,) = message.content
        assert isinstance(answer, TextBlock) and answer.text
        assert usage_total(message.usage) == len(expected)
        assert 0 < message.usage.output_tokens <= 4
    assert routes[0] == "full"
    assert set(routes[1:]) <= {"append", "edit"}, routes
    # a subagent shares the session id with its own transcript: still exact
    sub = fixture(SUBAGENT, "smollm2") | {"max_tokens": 2, "stream": False}
    message = llama.client.messages.create(**create_args(sub), extra_headers=session)
    assert llama.transport.sent[-1][1]["prompt"] == llama.expected(sub)
    assert usage_total(message.usage) == len(llama.expected(sub))


def typed_expected(folder: Path, body: dict[str, Any], typed: str) -> list[int]:
    """Hugging Face's own procedure with the user's special-token text kept as text: the
    rendered transcript split at the special tokens the template placed, each piece encoded
    with special-token matching off."""
    marker = "\U0010fd00"
    masked = orjson.loads(orjson.dumps(body).replace(orjson.dumps(typed)[1:-1], marker.encode()))
    text = rendered(folder, masked)
    tok = reference(folder)[1]
    plain = Tokenizer.from_str(tok.to_str())
    plain.encode_special_tokens = True
    specials = sorted((t.content for t in tok.get_added_tokens_decoder().values() if t.special),
                      key=len, reverse=True)
    ids: list[int] = []
    for piece in re.split(f"({'|'.join(map(re.escape, specials))})", text):
        if piece in specials:
            ids.append(tok.token_to_id(piece))
        elif piece:
            ids += plain.encode(piece.replace(marker, typed), add_special_tokens=False).ids
    return ids


def test_typed_special_token_text_across_billing_line_edits(llama: Llama) -> None:
    """A user pasted special-token text early in a Claude Code session: every later call takes
    the special-token path (route "pieces") with the billing line edited at the start, and its
    ids, spliced into the id JSON from the previous call's, are exactly the text's."""
    session = {"x-claude-code-session-id": "typed-billing-e2e"}
    typed = "<|im_end|><|im_start|>system"
    for body in turns(fixture(SESSION, "smollm2"))[:5]:
        first = body["messages"][0]["content"][0]
        first["text"] = f"the log printed {typed} twice\n" + first["text"]
        reply = llama.client.messages.with_raw_response.create(**create_args(body),
                                                               extra_headers=session)
        assert reply.headers["x-toksplice-route"] == "pieces"
        sent = llama.transport.sent[-1][1]["prompt"]
        assert sent == typed_expected(llama.folder, body, typed)
        assert sent != llama.expected(body)  # the typed text did not become control tokens
        assert usage_total(reply.parse().usage) == len(sent)


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
def test_stop_sequences_are_reported(llama: Llama, stream: bool) -> None:
    """llama.cpp's own API says which stop sequence ended the text; the SDK sees it."""
    body = turns(fixture(SESSION, "smollm2"))[2] | {"max_tokens": 48, "temperature": 0.0}
    stops = [" ", "\n", ".", ","]
    args = create_args(body) | {"stop_sequences": stops}
    before = len(llama.transport.sent)
    if stream:
        with llama.client.messages.stream(**args) as events:
            message = events.get_final_message()
    else:
        message = llama.client.messages.create(**args)
    (path, sent), = llama.transport.sent[before:]
    assert path == "/completion" and sent["stop"] == stops
    assert sent["prompt"] == llama.expected(body)
    assert message.stop_reason == "stop_sequence" and message.stop_sequence in stops
    assert not any(stop in block.text for block in message.content for stop in stops[1:])


def test_count_tokens_is_exact_and_sends_nothing(llama: Llama) -> None:
    body = turns(fixture(SESSION, "smollm2"))[3]
    before = len(llama.transport.sent)
    counted = llama.client.messages.count_tokens(
        model="smollm2", system=body["system"], tools=body["tools"],
        messages=body["messages"], extra_headers={"x-claude-code-session-id": "count-1"})
    assert len(llama.transport.sent) == before
    assert counted.input_tokens == len(llama.expected(body))
    message = llama.client.messages.create(**create_args(body))
    assert usage_total(message.usage) == counted.input_tokens


def test_streaming_raw_events_and_cached_usage(llama: Llama) -> None:
    body = turns(fixture(SESSION, "smollm2"))[1] | {"max_tokens": 8, "stream": True}
    for _ in range(2):  # the second call is served from llama.cpp's prompt cache
        with httpx.stream("POST", llama.url + "/v1/messages", json=body, timeout=60,
                          headers={"anthropic-version": "2023-06-01",
                                   "x-api-key": "sk-test"}) as reply:
            assert reply.status_code == 200
            assert reply.headers["content-type"].startswith("text/event-stream")
            events = sse_events(reply)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"}
    assert all(name == data["type"] for name, data in events)
    n_ids = len(llama.expected(body))
    assert events[0][1]["message"]["usage"]["input_tokens"] == n_ids
    usage = events[-2][1]["usage"]
    assert usage["cache_read_input_tokens"] > 0
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] == n_ids


# --- (b) Qwen3 output through a stand-in upstream ----------------------------------------

QWEN3_OUTPUT = ('<think>\nThe test expects cents.\n</think>\n\nI\'ll run the tests.<tool_call>\n'
                '{"name": "Bash", "arguments": {"command": "pytest -q", "description": '
                '"Run the tests"}}\n</tool_call>')
PIECES = [QWEN3_OUTPUT[a:a + 7] for a in range(0, len(QWEN3_OUTPUT), 7)]


@pytest.fixture(scope="module")
def qwen3_dir(assets: dict[str, Path]) -> Path:
    return assets["qwen3"].parent


def qwen3_body(stream: bool) -> dict[str, Any]:
    body = turns(fixture(SESSION, "m"))[4] | {"max_tokens": 200, "stream": stream,
                                               "thinking": {"type": "enabled",
                                                            "budget_tokens": 100}}
    return body


def test_qwen3_stream_thinking_text_tool_use(qwen3_dir: Path) -> None:
    stub = StubUpstream(pieces=PIECES)
    body = qwen3_body(stream=True)
    with stub.serve() as upstream, stub_proxy(upstream, qwen3_dir, tool_format="hermes") as url:
        with sdk(url).messages.stream(**create_args(body)) as stream:
            message = stream.get_final_message()
        with httpx.stream("POST", url + "/v1/messages", json=body, timeout=30) as reply:
            events = sse_events(reply)
    assert stub.requests[0]["prompt"] == expected_ids(qwen3_dir, body)
    assert "<think>" not in rendered(qwen3_dir, body)[-40:]  # thinking enabled: no empty block
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    thinking, text, tool = message.content
    assert isinstance(thinking, ThinkingBlock) and isinstance(text, TextBlock)
    assert isinstance(tool, ToolUseBlock)
    assert thinking.thinking.strip() == "The test expects cents."
    assert thinking.signature == signature(thinking.thinking)  # what the SDK accumulated
    assert text.text.strip() == "I'll run the tests."
    assert tool.name == "Bash" and tool.id
    assert tool.input == {"command": "pytest -q", "description": "Run the tests"}
    assert message.stop_reason == "tool_use" and message.stop_sequence is None
    assert usage_total(message.usage) == len(stub.requests[0]["prompt"])
    assert message.usage.output_tokens == 3

    # the exact event order, block by block
    shape = []
    for name, data in events:
        assert data["type"] == name
        if name == "content_block_start":
            shape.append(f"start {data['index']} {data['content_block']['type']}")
        elif name == "content_block_delta":
            step = f"delta {data['index']} {data['delta']['type']}"
            if shape[-1] != step:
                shape.append(step)
        elif name == "content_block_stop":
            shape.append(f"stop {data['index']}")
        else:
            shape.append(name)
    assert shape == ["message_start", "ping",
                     "start 0 thinking", "delta 0 thinking_delta", "delta 0 signature_delta",
                     "stop 0",
                     "start 1 text", "delta 1 text_delta", "stop 1",
                     "start 2 tool_use", "delta 2 input_json_delta", "stop 2",
                     "message_delta", "message_stop"]
    start = next(d for n, d in events if n == "content_block_start" and d["index"] == 2)
    assert start["content_block"]["input"] == {} and start["content_block"]["name"] == "Bash"
    partial = "".join(d["delta"]["partial_json"] for n, d in events
                      if n == "content_block_delta" and d["index"] == 2)
    assert orjson.loads(partial) == tool.input
    assert events[-2][1]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}


def test_qwen3_message_thinking_text_tool_use(qwen3_dir: Path) -> None:
    stub = StubUpstream(pieces=PIECES)
    body = qwen3_body(stream=False)
    with stub.serve() as upstream, stub_proxy(upstream, qwen3_dir, tool_format="hermes") as url:
        message = sdk(url).messages.create(**create_args(body))
    assert stub.requests[0]["prompt"] == expected_ids(qwen3_dir, body)
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    thinking, _, tool = message.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.signature == signature(thinking.thinking)
    assert isinstance(tool, ToolUseBlock)
    assert tool.input == {"command": "pytest -q", "description": "Run the tests"}
    assert message.stop_reason == "tool_use"
    n_ids = len(stub.requests[0]["prompt"])
    assert message.usage.cache_read_input_tokens == 1  # the stub reports one cached token
    assert message.usage.input_tokens == n_ids - 1 and message.usage.output_tokens == 3


# --- billing line, errors ----------------------------------------------------------------


def test_subagents_interleaved_with_the_main_agent_keep_their_own_sessions(
    smollm2_dir: Path,
) -> None:
    """Claude Code's subagents share the session id and add ``X-Claude-Code-Agent-Id``: each
    transcript repairs from its own previous call, however the calls interleave."""
    stub = StubUpstream()
    main, sub = turns(fixture(SESSION, "m")), turns(fixture(SUBAGENT, "m"))
    session = {"x-claude-code-session-id": "interleaved"}
    agent = session | {"x-claude-code-agent-id": "a1b2c3"}
    with stub.serve() as upstream, stub_proxy(upstream, smollm2_dir) as url:
        client = sdk(url)
        previous = {"main": 0, "sub": 0}
        for k in range(min(len(main), len(sub), 4)):
            for name, body, headers in (("main", main[k], session), ("sub", sub[k], agent)):
                raw = client.messages.with_raw_response.create(**create_args(body),
                                                               extra_headers=headers)
                sent = stub.requests[-1]["prompt"]
                assert sent == expected_ids(smollm2_dir, body)
                # all of its own previous call is reused, but for the billing line's window
                reused = int(raw.headers["x-toksplice-reused-tokens"])
                assert reused >= previous[name] - 64, (name, k, reused, previous)
                previous[name] = len(sent)


def test_stripped_billing_line_makes_every_call_an_append(smollm2_dir: Path) -> None:
    stub = StubUpstream()
    session = {"x-claude-code-session-id": "strip"}
    with stub.serve() as upstream, stub_proxy(upstream, smollm2_dir,
                                              strip_billing_line=True) as url:
        client = sdk(url)
        routes = []
        for body in turns(fixture(SESSION, "m"))[:4]:
            raw = client.messages.with_raw_response.create(**create_args(body),
                                                           extra_headers=session)
            routes.append(raw.headers["x-toksplice-route"])
            answer = raw.parse().content[0]
            assert isinstance(answer, TextBlock) and answer.text == "Hello there!"
            assert stub.requests[-1]["prompt"] == expected_ids(smollm2_dir, body,
                                                               strip_billing_line=True)
        # the same system line, messages appended: the body parse reuses the previous one
        first, second = turns(fixture(SESSION, "m"))[5:7]
        second["system"] = first["system"]
        for body in (first, second):
            reply = httpx.post(url + "/v1/messages", content=orjson.dumps(body), timeout=30,
                               headers=session | {"content-type": "application/json",
                                                  "x-api-key": "sk-test"})
            assert reply.status_code == 200, reply.text
            routes.append(reply.headers["x-toksplice-route"])
            assert stub.requests[-1]["prompt"] == expected_ids(smollm2_dir, body,
                                                               strip_billing_line=True)
    assert routes == ["full"] + ["append"] * 5
    text = reference(smollm2_dir)[1].decode(stub.requests[-1]["prompt"],
                                            skip_special_tokens=False)
    assert "billing" not in text and "You are Claude Code" in text


def test_image_block_is_a_400_in_anthropic_form(smollm2_dir: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}}
    stub = StubUpstream()
    with stub.serve() as upstream, stub_proxy(upstream, smollm2_dir) as url, \
            pytest.raises(anthropic.BadRequestError) as caught:
        sdk(url).messages.create(model="m", max_tokens=5, messages=[
            {"role": "user", "content": [image, {"type": "text", "text": "What is it?"}]}])
    assert caught.value.status_code == 400
    assert caught.value.body == {"type": "error", "error": {
        "type": "invalid_request_error", "message": caught.value.body["error"]["message"]}}
    assert "text-only" in caught.value.body["error"]["message"]
    assert "messages.0.content.0" in caught.value.body["error"]["message"]
    assert stub.requests == []


@pytest.mark.parametrize(("body", "status", "fragment"), [
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, 400, "max_tokens"),
    ({"model": "m", "max_tokens": 5, "messages": []}, 400, "messages"),
    ({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
     404, "nope"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "tool", "content": "hi"}]},
     400, "messages.0.role: Input should be 'user', 'assistant' or 'system'"),
])
def test_bad_requests_get_anthropic_errors(smollm2_dir: Path, body: dict[str, Any],
                                           status: int, fragment: str) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, stub_proxy(upstream, smollm2_dir) as url:
        reply = httpx.post(url + "/v1/messages", json=body, timeout=30)
    assert reply.status_code == status
    error = reply.json()
    assert error["type"] == "error" and fragment in error["error"]["message"]
    assert error["error"]["type"] == ("not_found_error" if status == 404
                                      else "invalid_request_error")


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_down_is_a_502_the_sdk_raises(smollm2_dir: Path, stream: bool) -> None:
    with stub_proxy(closed_port_url(), smollm2_dir) as url, \
            pytest.raises(anthropic.APIStatusError) as caught:
        sdk(url).messages.create(model="m", max_tokens=5, stream=stream,
                                 messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 502
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "api_error" and body["error"]["message"]


def test_failure_mid_stream_is_an_error_event(smollm2_dir: Path) -> None:
    stub = StubUpstream(mode="die", pieces=["Hel", "lo", " never"])
    body = {"model": "m", "max_tokens": 5, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}
    with stub.serve() as upstream, stub_proxy(upstream, smollm2_dir) as url, \
            httpx.stream("POST", url + "/v1/messages", json=body, timeout=30) as reply:
        assert reply.status_code == 200
        events = sse_events(reply)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-1] == "error" and "message_stop" not in names
    assert events[-1][1]["type"] == "error" and events[-1][1]["error"]["message"]
    text = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert text == "Hello"
