"""End to end over real HTTP: client -> proxy -> the real llama.cpp server (SmolLM2).

Every prompt the proxy sent upstream is recorded and compared with the reference encode of
the rendered conversation and with llama.cpp's own /tokenize of it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from tokenizers import Tokenizer

from app.config import Settings
from app.main import create_app, load_template
from app.rendering import ChatTemplate
from app.tools.local_upstream import LocalLlamaServer
from tests.api.servers import RecordingTransport, serving

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from loadtest.agent_sessions import chat_requests

MODEL = "smollm2"


class Proxy:
    def __init__(self, url: str, transport: RecordingTransport, upstream: str,
                 folder: Path) -> None:
        self.url, self.transport, self.upstream = url, transport, upstream
        self.template: ChatTemplate = load_template(folder / "tokenizer_config.json")
        self.reference = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.http = httpx.Client(base_url=url, timeout=120)

    def chat(self, body: dict[str, Any], **headers: str) -> httpx.Response:
        return self.http.post("/v1/chat/completions", json=body, headers=headers)

    def expected_ids(self, body: dict[str, Any]) -> list[int]:
        text = self.template.render(body["messages"], tools=body.get("tools"))
        ids: list[int] = self.reference.encode(text, add_special_tokens=False).ids
        upstream = httpx.post(self.upstream + "/tokenize", timeout=60, json={
            "content": text, "add_special": False, "parse_special": True}).json()["tokens"]
        assert ids == upstream, "reference and llama.cpp disagree on the rendered text"
        return ids


@pytest.fixture(scope="module")
def proxy(llama_server: LocalLlamaServer, smollm2_dir: Path) -> Iterator[Proxy]:
    transport = RecordingTransport()
    # no periodic alignment re-check (tests/upstream/test_realignment.py): its /tokenize
    # calls would land among the recorded requests of a module that runs past 300 s
    settings = Settings(upstream=llama_server.url, tokenizer=smollm2_dir, model=MODEL,
                        alignment_recheck_s=0)
    with serving(create_app(settings, transport=transport)) as url:
        yield Proxy(url, transport, llama_server.url, smollm2_dir)


def _session(seed: int, max_chars: int = 9000) -> list[dict[str, Any]]:
    """Agent-session request bodies that fit SmolLM2's 4,096-token slots, made renderable by
    its ChatML template (it concatenates ``content``, so null contents become "")."""
    bodies = []
    for body in chat_requests(seed, target_chars=max_chars, append_chars=300, reasoning=False,
                              model=MODEL):
        messages = [dict(m, content=m.get("content") or "") for m in body["messages"]]
        if sum(len(m["content"]) for m in messages) > max_chars:
            break
        bodies.append({"model": MODEL, "messages": messages, "max_tokens": 4,
                       "temperature": 0.0})
    return bodies


def test_multi_turn_session_sends_exact_ids_and_repairs(proxy: Proxy) -> None:
    routes = []
    for body in _session(seed=3)[:12]:
        before = len(proxy.transport.sent)
        reply = proxy.chat(body, **{"x-session-id": "e2e-multi"})
        assert reply.status_code == 200, reply.text
        routes.append(reply.headers["x-toksplice-route"])
        sent = proxy.transport.sent[before:]
        assert [path for path, _ in sent] == ["/v1/completions"]
        expected = proxy.expected_ids(body)
        assert sent[0][1]["prompt"] == expected
        usage = reply.json()["usage"]
        assert usage["prompt_tokens"] == len(expected)
        assert usage["completion_tokens"] > 0
        assert "cached_tokens" in usage["prompt_tokens_details"]
    assert routes[0] == "full"
    assert set(routes[1:]) <= {"append", "edit"} and routes.count("append") >= 8


def test_streaming_answer_and_usage(proxy: Proxy) -> None:
    body = _session(seed=5)[1] | {"stream": True, "stream_options": {"include_usage": True},
                                  "max_tokens": 12}
    for _ in range(2):  # the second call is served from llama.cpp's prompt cache
        with proxy.http.stream("POST", "/v1/chat/completions", json=body) as reply:
            assert reply.status_code == 200
            assert reply.headers["content-type"].startswith("text/event-stream")
            events = [line[6:] for line in reply.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finish[-1] in ("stop", "length") and not any(finish[:-1])
    usage = chunks[-1]["usage"]
    assert usage["prompt_tokens"] == len(proxy.expected_ids(body))
    assert usage["prompt_tokens_details"]["cached_tokens"] > 0


def test_concurrent_calls_of_one_session_stay_exact(proxy: Proxy) -> None:
    bodies = [dict(b, max_tokens=1) for b in _session(seed=7)[:5]]
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda b: proxy.chat(b, **{"x-session-id": "e2e-race"}),
                                bodies * 2))
    assert all(r.status_code == 200 for r in replies)
    sent = [prompt for _, body in proxy.transport.sent[-len(replies):]
            for prompt in [body["prompt"]]]
    expected = {tuple(proxy.expected_ids(b)) for b in bodies}
    assert {tuple(p) for p in sent} == expected


def test_tenants_never_share_sessions(proxy: Proxy) -> None:
    body = _session(seed=11)[2]
    first = proxy.chat(body, authorization="Bearer key-a", **{"x-session-id": "shared"})
    again = proxy.chat(body, authorization="Bearer key-a", **{"x-session-id": "shared"})
    other = proxy.chat(body, authorization="Bearer key-b", **{"x-session-id": "shared"})
    routes = [r.headers["x-toksplice-route"] for r in (first, again, other)]
    assert routes == ["full", "hit", "full"]


def test_user_typed_special_token_text_is_plain_text(proxy: Proxy) -> None:
    typed = "please print the string <|im_end|> and <|im_start|>system literally"
    body = {"model": MODEL, "max_tokens": 2,
            "messages": [{"role": "user", "content": typed}]}
    reply = proxy.chat(body)
    assert reply.status_code == 200, reply.text
    sent = proxy.transport.sent[-1][1]["prompt"]
    specials = {proxy.reference.token_to_id("<|im_end|>"),
                proxy.reference.token_to_id("<|im_start|>")}
    template_placed = sum(1 for t in proxy.expected_ids(
        {"messages": [{"role": "user", "content": "x"}]}) if t in specials)
    assert sum(1 for t in sent if t in specials) == template_placed


@pytest.mark.parametrize(("payload", "status", "fragment"), [
    (b"{not json", 400, "malformed JSON"),
    (b'{"model": "smollm2", "messages": [{"role": "user", "content": "\\ud800"}]}', 400,
     "surrogate"),
    (b'{"model": "smollm2", "messages": [{"role": "user", "content": "\xff"}]}', 400, "UTF-8"),
    (b'{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}', 404, "gpt-9"),
    (b'{"model": "smollm2", "messages": []}', 400, "messages"),
    (b'{"model": "smollm2", "messages": [{"role": "robot", "content": "hi"}]}', 400, "role"),
    (b'{"model": "smollm2", "messages": [{"role": "user", "content": [{"type": "image_url", '
     b'"image_url": {"url": "data:,"}}]}]}', 400, "text"),
])
def test_bad_requests_get_openai_errors(proxy: Proxy, payload: bytes, status: int,
                                        fragment: str) -> None:
    reply = proxy.http.post("/v1/chat/completions", content=payload,
                            headers={"content-type": "application/json"})
    assert reply.status_code == status
    error = reply.json()["error"]
    assert fragment in error["message"] and error["type"] and set(error) == {
        "message", "type", "param", "code"}


def test_models_and_health(proxy: Proxy) -> None:
    assert [m["id"] for m in proxy.http.get("/v1/models").json()["data"]] == [MODEL]
    health = proxy.http.get("/health").json()
    assert health == health | {"status": "ok", "upstream": "ok", "sending": "token ids",
                               "tool_format": "hermes", "reasoning": "<think>…</think>"}


def test_first_calls_in_parallel_chunks_send_exact_ids(
    llama_server: LocalLlamaServer, smollm2_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``TOKSPLICE_PARALLEL_CHUNK=512``: each session's first call is cut into ~512-byte
    chunks encoded in parallel, and what llama.cpp gets is still the reference's ids (which
    its own /tokenize agrees with)."""
    transport = RecordingTransport()
    monkeypatch.setenv("TOKSPLICE_PARALLEL_CHUNK", "-1")
    with pytest.raises(ValueError, match="parallel_chunk"):
        Settings()
    monkeypatch.setenv("TOKSPLICE_PARALLEL_CHUNK", "512")
    settings = Settings(upstream=llama_server.url, tokenizer=smollm2_dir, model=MODEL,
                        shadow_rate=0.0, alignment_recheck_s=0)
    assert settings.parallel_chunk == 512
    app = create_app(settings, transport=transport)
    with serving(app) as url:
        proxy = Proxy(url, transport, llama_server.url, smollm2_dir)
        for seed in (21, 22, 23):
            body = _session(seed)[-1]
            # Special-token lookalikes in tool outputs would take the typed-text path.
            body["messages"] = [
                dict(m, content=m["content"].replace("<|", "< |")) for m in body["messages"]
            ]
            reply = proxy.chat(body, **{"x-session-id": f"e2e-chunks-{seed}"})
            assert reply.status_code == 200, reply.text
            assert reply.headers["x-toksplice-route"] in ("full", "edit")
            assert transport.sent[-1][1]["prompt"] == proxy.expected_ids(body)
        stats = app.state.chat.tokenizer.explain()["parallel_chunks"]
        app.state.telemetry.drain()
        traces = proxy.http.get("/debug/traces.json").json()["requests"]
    # (the native encoder takes a few long chunks: at most two per core)
    assert stats["chunk_bytes"] == 512 and stats["texts"] >= 3
    assert stats["chunks"] >= 2 * stats["texts"]
    # Each first call's trace says how many chunks its tokenize span encoded in parallel.
    chunks = [span["attributes"]["toksplice.parallel_chunks"]
              for trace in traces[:3] for span in trace["spans"] if span["name"] == "tokenize"]
    assert len(chunks) == 3 and min(chunks) > 1
