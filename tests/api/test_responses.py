"""``POST /v1/responses`` over real HTTP with the official ``openai`` SDK as the client.

(a) a Codex-shaped session against the real llama.cpp server (SmolLM2, ChatML): every prompt
sent upstream equals the reference encode of the rendered canonical chat request, and the
session's later calls repair (append / edit) with ``prompt_cache_key`` as the session;
(b) Qwen3-style output (``<think>`` + a Hermes ``<tool_call>``) from a scripted upstream
through the Qwen3 template: the SDK's parsed output, the raw event order and sequence numbers;
(c) errors: images, stored-response references, upstream down, failure mid-stream.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from tokenizers import Tokenizer

from app.config import Settings
from app.main import create_app
from app.protocol.incremental_json import BodyParser
from app.protocol.responses_request import ChatTranslator, chat_body
from app.rendering import ChatTemplate
from app.sessions.registry import SessionRegistry
from app.tools.local_upstream import LocalLlamaServer
from tests.api.servers import RecordingTransport, StubUpstream, closed_port_url, serving

FIXTURES = Path(__file__).parent / "fixtures"
MODEL = "m"


def codex_session(model: str) -> list[dict[str, Any]]:
    """The Codex session fixture as the request bodies Codex sends, one per turn."""
    session = orjson.loads((FIXTURES / "responses_codex_session.json").read_bytes())
    return [dict(copy.deepcopy(session["request"]), model=model,
                 input=copy.deepcopy(session["input"][:n])) for n in session["turns"]]


@functools.cache
def reference(folder: Path) -> tuple[ChatTemplate, Tokenizer]:
    return (ChatTemplate.from_tokenizer_config(folder / "tokenizer_config.json"),
            Tokenizer.from_file(str(folder / "tokenizer.json")))


def rendered(folder: Path, body: dict[str, Any]) -> str:
    """The canonical chat request that the Responses request ``body`` stands for, rendered."""
    chat = chat_body(body)
    return reference(folder)[0].render(chat["messages"], tools=chat.get("tools"),
                                       chat_template_kwargs=chat.get("chat_template_kwargs"))


def expected_ids(folder: Path, body: dict[str, Any]) -> list[int]:
    ids: list[int] = reference(folder)[1].encode(rendered(folder, body),
                                                 add_special_tokens=False).ids
    return ids


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, timeout=120)


def sse_events(reply: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of every event of a Responses stream."""
    events, name = [], None
    for line in reply.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            assert name is not None, "a data line without its event line"
            events.append((name, orjson.loads(line[6:])))
            name = None
    return events


# --- translation (no server) -------------------------------------------------------------


def test_codex_items_become_chat_turns() -> None:
    body = codex_session(MODEL)[4]  # up to the apply_patch output
    chat = chat_body(body)
    roles = [m["role"] for m in chat["messages"]]
    assert roles == ["system", "developer", "user", "user", "assistant", "tool", "assistant",
                     "tool", "assistant", "tool", "assistant", "tool"]
    assert chat["messages"][0]["content"].startswith("You are Codex")
    first = chat["messages"][4]
    assert first["content"] is None and first["reasoning_content"].startswith("**Inspecting")
    assert [c["id"] for c in first["tool_calls"]] == ["call_01x7Qm"]
    assert chat["messages"][5] == {"role": "tool", "tool_call_id": "call_01x7Qm",
                                   "content": body["input"][5]["output"]}
    # reasoning, an assistant message and a function call: one assistant turn
    patching = chat["messages"][10]
    assert patching["content"] == "`add` subtracts instead of adding. Patching it."
    assert patching["reasoning_content"].startswith("**Fixing add**")
    (call,) = patching["tool_calls"]
    assert call == {"id": "call_04x7Qm", "type": "function", "function": {
        "name": "apply_patch", "arguments": body["input"][12]["arguments"]}}
    assert [t["function"]["name"] for t in chat["tools"]] == ["shell", "apply_patch",
                                                             "update_plan"]  # no web_search
    assert chat["stream"] and chat["stream_options"] == {"include_usage": True}
    assert chat["parallel_tool_calls"] is False and "max_tokens" not in chat


def test_consecutive_calls_share_a_turn_and_options_map() -> None:
    body = {"model": MODEL, "instructions": "Be brief.", "max_output_tokens": 7,
            "temperature": 0.2, "reasoning": {"effort": "none"},
            "tool_choice": {"type": "function", "name": "shell"},
            "tools": [{"type": "function", "name": "shell", "parameters": {}}],
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "function_call", "call_id": "a", "name": "shell", "arguments": "{}"},
                {"type": "function_call", "call_id": "b", "name": "shell", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "a",
                 "output": [{"type": "input_text", "text": "x"}]},
                {"type": "function_call_output", "call_id": "b", "output": "y"},
                {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA..."},
            ]}
    chat = chat_body(body)
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "assistant", "tool",
                                                     "tool", "assistant"]
    assert [c["id"] for c in chat["messages"][2]["tool_calls"]] == ["a", "b"]
    # a reasoning item opens an assistant turn, as in vLLM, its encrypted content ignored
    assert chat["messages"][5] == {"role": "assistant", "content": None, "reasoning_content": ""}
    assert chat["messages"][3]["content"] == "x"
    assert chat["max_tokens"] == 7 and chat["temperature"] == 0.2
    assert chat["chat_template_kwargs"] == {"enable_thinking": False}
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "shell"}}
    assert "stream" not in chat


def test_translation_resumes_from_the_previous_call() -> None:
    """What the router does: the body parser reuses the previous call's items, the
    translator translates only the new ones; the result equals a fresh translation and the
    previous call's message objects are never changed."""
    bodies = codex_session(MODEL)
    extra = [{"type": "function_call", "call_id": "z", "name": "shell", "arguments": "{}"}]
    message = bodies[6]["input"][16]
    assert message["role"] == "assistant"
    tail = dict(bodies[-1], input=[*bodies[-1]["input"], message])
    bodies += [tail, dict(tail, input=[*tail["input"], *extra])]  # a call after a message
    parser = BodyParser(SessionRegistry(1 << 20).slot("body"), array="input")
    translator = ChatTranslator(SessionRegistry(1 << 20).slot("turns"))
    previous: list[dict[str, Any]] = []
    snapshots: list[bytes] = []
    for k, body in enumerate(bodies):
        parsed = parser.parse(orjson.dumps(body), "key")
        parsed.valid()  # as the route does once the body passed validation
        assert parsed.reused_messages == (len(bodies[k - 1]["input"]) if k else 0)
        chat, validated = translator.translate(parsed.body, "key", parsed.reused_messages)
        assert chat == chat_body(body)
        assert validated == (len(previous) - 1 if k else 0)
        assert all(a is b for a, b in zip(chat["messages"][:validated], previous, strict=False))
        assert [orjson.dumps(m) for m in previous] == snapshots  # never edited in place
        previous = chat["messages"]
        snapshots = [orjson.dumps(m) for m in previous]
        if k == len(bodies) - 2:
            unmerged = previous[-1]
    merged = chat["messages"][-1]
    assert merged["content"].startswith("Fixed") and "tool_calls" not in unmerged
    assert [c["id"] for c in merged["tool_calls"]] == ["z"]
    edited = dict(tail, instructions="Changed.")
    parsed = parser.parse(orjson.dumps(edited), "key")
    assert translator.translate(parsed.body, "key", parsed.reused_messages) == (
        chat_body(edited), 0)


# --- (a) the real llama.cpp server --------------------------------------------------------


@pytest.fixture(scope="module")
def llama_proxy(llama_server: LocalLlamaServer,
                smollm2_dir: Path) -> Iterator[tuple[str, RecordingTransport]]:
    transport = RecordingTransport()
    settings = Settings(upstream=llama_server.url, tokenizer=smollm2_dir, model="smollm2")
    with serving(create_app(settings, transport=transport)) as url:
        yield url, transport


def test_codex_session_sends_exact_ids_and_repairs(
        llama_proxy: tuple[str, RecordingTransport], llama_server: LocalLlamaServer,
        smollm2_dir: Path) -> None:
    url, transport = llama_proxy
    sdk = client(url)
    routes, statuses = [], []
    for k, body in enumerate(codex_session("smollm2")):
        before = len(transport.sent)
        options = {name: body[name] for name in ("model", "instructions", "input", "tools",
                                                 "tool_choice", "parallel_tool_calls",
                                                 "reasoning", "store", "include",
                                                 "prompt_cache_key")}
        options["max_output_tokens"] = 3
        if k % 2:  # streamed, like Codex
            stream = sdk.responses.create(**options, stream=True)
            routes.append(stream.response.headers["x-toksplice-route"])
            final = list(stream)[-1].response  # type: ignore[union-attr]
        else:
            raw = sdk.responses.with_raw_response.create(**options)
            final = raw.parse()
            routes.append(raw.headers["x-toksplice-route"])
        (path, sent), = transport.sent[before:]
        assert path == "/v1/completions"
        expected = expected_ids(smollm2_dir, dict(body, max_output_tokens=3))
        assert sent["prompt"] == expected
        if k == 0:
            upstream = httpx.post(llama_server.url + "/tokenize", timeout=60, json={
                "content": rendered(smollm2_dir, body),
                "add_special": False, "parse_special": True}).json()["tokens"]
            assert upstream == expected, "reference and llama.cpp disagree"
        assert final.id.startswith("resp_") and final.object == "response"
        statuses.append(final.status)
        if final.status == "incomplete":
            assert final.incomplete_details is not None
            assert final.incomplete_details.reason == "max_output_tokens"
        assert final.usage is not None and final.usage.input_tokens == len(expected)
        assert 0 < final.usage.output_tokens <= 3
        assert final.usage.total_tokens == len(expected) + final.usage.output_tokens
        assert final.usage.input_tokens_details.cached_tokens >= 0
        (message,) = [item for item in final.output if item.type == "message"]
        assert message.role == "assistant" and message.content[0].type == "output_text"
        assert final.output_text == message.content[0].text
    assert set(statuses) <= {"completed", "incomplete"} and "incomplete" in statuses
    assert routes[0] == "full"
    assert set(routes[1:]) <= {"append", "edit"}
    assert routes[1:].count("append") >= 3


def test_streamed_answer_events_against_llama(
        llama_proxy: tuple[str, RecordingTransport]) -> None:
    url, _ = llama_proxy
    body = codex_session("smollm2")[7] | {"max_output_tokens": 6, "temperature": 0.0}
    with httpx.stream("POST", url + "/v1/responses", json=body, timeout=120) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        assert reply.headers["x-toksplice-route"] in ("append", "edit", "full", "hit")
        events = sse_events(reply)
    names = [name for name, _ in events]
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert all(data["type"] == name for name, data in events)
    assert names[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert names[-4:-1] == ["response.output_text.done", "response.content_part.done",
                            "response.output_item.done"]
    final = events[-1][1]["response"]
    assert names[-1] == "response." + final["status"]
    if final["status"] == "incomplete":
        assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    deltas = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    assert final["output"][0]["content"][0]["text"] == deltas != ""
    assert 0 < final["usage"]["output_tokens"] <= 6


# --- (b) Qwen3 output through a scripted upstream -----------------------------------------

QWEN3_OUTPUT = ("<think>\nThe tests need a sub function.\n</think>\n\nAdding `sub` now."
                '<tool_call>\n{"name": "apply_patch", "arguments": {"input": "*** Begin Patch\\n'
                '*** Update File: calc/ops.py\\n@@\\n+def sub(a, b):\\n+    return a - b\\n'
                '*** End Patch\\n"}}\n</tool_call>')
CUTS = [0, 1, 4, 9, 20, 30, 38, 41, 47, 55, 63, 66, 70, 81, 90, 120, 150, 190, 230]
PIECES = [QWEN3_OUTPUT[a:b] for a, b in zip(CUTS, [*CUTS[1:], None], strict=True)]
PATCH = ("*** Begin Patch\n*** Update File: calc/ops.py\n@@\n+def sub(a, b):\n"
         "+    return a - b\n*** End Patch\n")


@pytest.fixture(scope="module")
def qwen3_dir(assets: dict[str, Path]) -> Path:
    return assets["qwen3"].parent


@contextmanager
def stub_proxy(stub: StubUpstream, folder: Path, **options: Any) -> Iterator[str]:
    with stub.serve() as upstream:
        settings = Settings(upstream=upstream, tokenizer=folder, model=MODEL,
                            **{"alignment_check": False, **options})
        with serving(create_app(settings)) as url:
            yield url


def qwen3_body(stream: bool) -> dict[str, Any]:
    body = codex_session(MODEL)[6]  # ends with the user's "also add sub" request
    return body | {"stream": stream}


def check_qwen3_output(response: Any) -> None:
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "message", "function_call"]
    reasoning, message, call = response.output
    assert reasoning.summary[0].type == "summary_text"
    assert reasoning.summary[0].text.strip() == "The tests need a sub function."
    assert message.content[0].text.strip() == "Adding `sub` now."
    assert response.output_text.strip() == "Adding `sub` now."
    assert call.id.startswith("fc_") and call.call_id and call.name == "apply_patch"
    assert orjson.loads(call.arguments) == {"input": PATCH}
    assert response.status == "completed"


def test_qwen3_stream_through_the_sdk(qwen3_dir: Path) -> None:
    assert "".join(PIECES) == QWEN3_OUTPUT
    stub = StubUpstream(pieces=PIECES)
    body = qwen3_body(stream=True)
    with stub_proxy(stub, qwen3_dir, tool_format="hermes") as url:
        options = {k: v for k, v in body.items() if k != "stream"}
        with client(url).responses.stream(**options) as stream:
            seen = [event.type for event in stream]
            final = stream.get_final_response()
        with httpx.stream("POST", url + "/v1/responses", json=body, timeout=30) as reply:
            assert reply.status_code == 200
            events = sse_events(reply)
    check_qwen3_output(final)
    assert final.usage is not None
    assert final.usage.input_tokens == len(expected_ids(qwen3_dir, body))
    assert stub.requests[0]["prompt"] == expected_ids(qwen3_dir, body)
    assert stub.requests[0]["prompt"] == stub.requests[1]["prompt"]
    # Codex's developer message (sandbox rules) reaches the model: Qwen3's template names no
    # "developer" role, so it joins the instructions' system turn, as vLLM merges them
    system_turn = rendered(qwen3_dir, body).split("<|im_end|>")[0]
    assert system_turn.startswith("<|im_start|>system\nYou are Codex")
    assert "\n\n<permissions instructions>" in system_turn
    names = [name for name, _ in events]
    assert seen == names
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert all(d["type"] == name for name, d in events)
    collapsed = [n for k, n in enumerate(names) if k == 0 or n != names[k - 1]]
    assert collapsed == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed",
    ]
    added = [d for n, d in events if n == "response.output_item.added"]
    done = [d for n, d in events if n == "response.output_item.done"]
    assert [d["output_index"] for d in added] == [d["output_index"] for d in done] == [0, 1, 2]
    assert [d["item"]["id"] for d in added] == [d["item"]["id"] for d in done]
    completed = events[-1][1]["response"]
    assert completed["output"] == [d["item"] for d in done]
    arguments = "".join(d["delta"] for n, d in events
                        if n == "response.function_call_arguments.delta")
    assert orjson.loads(arguments) == {"input": PATCH}


def test_qwen3_answer_not_streamed(qwen3_dir: Path) -> None:
    stub = StubUpstream(pieces=PIECES)
    body = qwen3_body(stream=False)
    with stub_proxy(stub, qwen3_dir, tool_format="hermes") as url:
        options = {k: v for k, v in body.items() if k != "stream"}
        raw = client(url).responses.with_raw_response.create(**options)
    response = raw.parse()
    check_qwen3_output(response)
    assert stub.requests[0]["prompt"] == expected_ids(qwen3_dir, body)
    assert response.usage is not None
    assert response.usage.input_tokens == len(stub.requests[0]["prompt"])
    assert response.usage.input_tokens_details.cached_tokens == 1
    assert raw.headers["x-toksplice-prompt-tokens"] == str(response.usage.input_tokens)


# --- (c) errors ---------------------------------------------------------------------------


def test_image_input_is_a_400_openai_error(smollm2_dir: Path) -> None:
    stub = StubUpstream()
    with stub_proxy(stub, smollm2_dir) as url:
        with pytest.raises(openai.BadRequestError) as raised:
            client(url).responses.create(model=MODEL, input=[{"role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}]}])
        reply = httpx.post(url + "/v1/responses", timeout=30, json={
            "model": MODEL, "input": "hi", "previous_response_id": "resp_123"})
    assert raised.value.status_code == 400
    error = raised.value.body
    assert isinstance(error, dict)
    assert "text-only" in error["message"] and error["type"] == "invalid_request_error"
    assert reply.status_code == 400
    assert "previous_response_id" in reply.json()["error"]["message"]
    assert not stub.requests


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_down_is_502(smollm2_dir: Path, stream: bool) -> None:
    settings = Settings(upstream=closed_port_url(), tokenizer=smollm2_dir, model=MODEL,
                        alignment_check=False)
    with serving(create_app(settings)) as url, pytest.raises(openai.APIStatusError) as raised:
        client(url).responses.create(model=MODEL, input="Say hello.", stream=stream)
    assert raised.value.status_code == 502
    assert isinstance(raised.value.body, dict) and raised.value.body["type"] == "upstream_error"


def test_failure_mid_stream_is_response_failed(smollm2_dir: Path) -> None:
    stub = StubUpstream(mode="die", pieces=["Hel", "lo", " never"])
    with stub_proxy(stub, smollm2_dir) as url:
        events = list(client(url).responses.create(model=MODEL, input="Say hello.",
                                                   stream=True))
    names = [event.type for event in events]
    assert names[0] == "response.created" and names[-1] == "response.failed"
    assert "response.completed" not in names
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Hello"
    failed = events[-1].response
    assert failed.status == "failed" and failed.error is not None and failed.error.message
    assert failed.output[0].type == "message" and failed.output[0].status == "incomplete"
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_prompt_cache_key_is_the_session(smollm2_dir: Path) -> None:
    stub = StubUpstream()
    body = {"model": MODEL, "input": "Say hello.", "instructions": "Be brief."}
    with stub_proxy(stub, smollm2_dir) as url:
        sdk = client(url).responses.with_raw_response
        routes = [sdk.create(**body, prompt_cache_key=key).headers["x-toksplice-route"]
                  for key in ("conv-a", "conv-b", "conv-a")]
    assert routes == ["full", "full", "hit"]


def test_client_disconnect_cancels_the_upstream(smollm2_dir: Path) -> None:
    stub = StubUpstream(mode="slow")
    body = {"model": MODEL, "input": "Say hello.", "stream": True}
    with stub_proxy(stub, smollm2_dir) as url:
        with httpx.stream("POST", url + "/v1/responses", json=body, timeout=30) as reply:
            lines = reply.iter_lines()
            received = [line for line, _ in zip(lines, range(16), strict=False)]
            assert any("response.output_text.delta" in line for line in received)
        assert stub.cancelled_flag.wait(5), "the upstream response was never cancelled"
