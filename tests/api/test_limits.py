"""Hostile clients over real HTTP: a body that never finishes (408), a 10M-character word,
JSON nested past any sane depth.  Each gets an answer (never a hang or a 500) while the
proxy keeps serving others."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

from tests.api.servers import StubUpstream
from tests.api.test_faults import HELLO, MODEL, assert_openai_error, expected_ids, proxy


def test_stalled_body_gets_408_and_the_proxy_keeps_serving(smollm2_dir: Path) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir, client_timeout=0.5) as http:
        url = urlparse(str(http.base_url))
        with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
                b'content-type: application/json\r\ncontent-length: 5000\r\n\r\n{"model"'
            )
            assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
            head = sock.recv(65536).decode()
        assert head.startswith("HTTP/1.1 408"), head
        assert '"type":"timeout_error"' in head


def test_ten_million_character_word_is_answered_while_others_are_served(
    smollm2_dir: Path,
) -> None:
    """One pre-tokenizer piece of 10M characters: a full encode in a worker thread (seconds,
    linear), exact length; meanwhile the event loop answers other calls."""
    stub = StubUpstream()
    big = {"model": MODEL, "messages": [{"role": "user", "content": "a" * 10_000_000}]}
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http:
        outcome: dict[str, httpx.Response] = {}
        worker = threading.Thread(
            target=lambda: outcome.setdefault(
                "big", http.post("/v1/chat/completions", json=big, timeout=300)
            )
        )
        worker.start()
        served_meanwhile = 0
        while worker.is_alive():
            assert http.get("/health/live").status_code == 200
            assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
            if all(len(r["prompt"]) < 100 for r in stub.requests):  # the big one not sent yet
                served_meanwhile += 1
        worker.join()
    assert outcome["big"].status_code == 200, outcome["big"].text[:300]
    assert served_meanwhile >= 3
    (prompt,) = [r["prompt"] for r in stub.requests if len(r["prompt"]) >= 100]
    assert prompt == expected_ids(smollm2_dir, big)


@pytest.mark.parametrize("depth", [2_000, 200_000])
def test_deeply_nested_json_is_a_400(smollm2_dir: Path, depth: int) -> None:
    body = (
        b'{"model": "m", "messages": [{"role": "user", "content": "hi", "x": '
        + b"[" * depth
        + b"]" * depth
        + b"}]}"
    )
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http:
        reply = http.post(
            "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        assert_openai_error(reply, 400)
        assert http.post("/v1/chat/completions", json=HELLO).status_code == 200
    assert stub.requests[-1]["prompt"] == expected_ids(smollm2_dir, HELLO)


def test_deep_but_parseable_tool_arguments_are_rendered_or_refused(smollm2_dir: Path) -> None:
    """Nesting within the JSON parser's limit reaches the template: it renders (exact ids) or
    fails as a 400, never a 500."""
    nested: object = "leaf"
    for _ in range(500):
        nested = {"k": nested}
    body = dict(
        HELLO,
        messages=[
            *HELLO["messages"],
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": nested},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
    )
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http:
        reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code in (200, 400), reply.text[:300]
    if reply.status_code == 200:
        assert stub.requests[-1]["prompt"] == expected_ids(smollm2_dir, body)
