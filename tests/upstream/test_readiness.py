"""Alignment is never skipped for good: a real llama.cpp upstream started after the proxy.

While nothing answers, readiness says so and every client API gets a 503 in its own error
format, with no request sent upstream; once llama.cpp answers, the check runs again, and the
ids that then flow are exactly the reference encode, with the limit the slot's context has
left after the prompt.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import httpx
import pytest
from tokenizers import Tokenizer

from app.config import Settings
from app.errors import UpstreamNotReadyError
from app.main import GIL_SWITCH_S, create_app
from app.rendering import ChatTemplate
from app.tools.local_upstream import LocalLlamaServer
from app.upstream.learned import Learned
from app.upstream.readiness import Readiness
from tests.api.servers import RecordingTransport, closed_port_url, serving

MODEL = "smollm2"
HELLO = {"model": MODEL, "max_tokens": None,
         "messages": [{"role": "user", "content": "Say hello."}]}
N_CTX, SLOTS = 2048, 2


def expected_ids(folder: Path) -> list[int]:
    template = ChatTemplate.from_tokenizer_config(folder / "tokenizer_config.json")
    text = template.render(HELLO["messages"])
    ids: list[int] = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(
        text, add_special_tokens=False).ids
    return ids


def test_an_upstream_that_starts_later_is_checked_before_ids_flow(
        assets: dict[str, Path], smollm2_dir: Path) -> None:
    pytest.importorskip("xllamacpp", reason="xllamacpp is not installed: no local llama.cpp")
    upstream = closed_port_url()
    port = int(upstream.rsplit(":", 1)[1])
    recorder = RecordingTransport()
    settings = Settings(upstream=upstream, tokenizer=smollm2_dir, model=MODEL,
                        alignment_check=True)
    with serving(create_app(settings, transport=recorder)) as url, \
            httpx.Client(base_url=url, timeout=60) as http:
        ready = http.get("/health/ready")
        assert ready.status_code == 503 and ready.json()["status"] == "unavailable"
        chat = http.post("/v1/chat/completions", json=HELLO)
        assert chat.status_code == 503, chat.text
        error = chat.json()["error"]
        assert error["type"] == "upstream_not_ready" and "not ready" in error["message"]
        anthropic = http.post("/v1/messages", json={
            "model": MODEL, "max_tokens": 5, "messages": HELLO["messages"]})
        assert anthropic.status_code == 503
        assert anthropic.json()["type"] == "error" and anthropic.json()["error"]["message"]
        assert anthropic.json()["error"]["type"] == "overloaded_error"  # Claude Code retries
        assert not [p for p, _ in recorder.sent if p.startswith("/v1/completions")]

        with LocalLlamaServer(assets["smollm2_gguf"], port=port, n_ctx=N_CTX,
                              n_parallel=SLOTS):
            deadline = time.monotonic() + 60  # the background retry, not a timing assertion
            while (ready := http.get("/health/ready")).status_code != 200:
                assert time.monotonic() < deadline, ready.text
                time.sleep(0.1)
            health = ready.json()
            assert health["sending"] == "token ids"
            assert health["context_tokens"] == N_CTX // SLOTS  # a slot's, not the total
            reply = http.post("/v1/chat/completions", json=HELLO)
            assert reply.status_code == 200, reply.text
            assert reply.json()["choices"][0]["message"]["content"] is not None
    ids = expected_ids(smollm2_dir)
    tokenized = [p for p, _ in recorder.sent if p == "/tokenize"]
    assert tokenized, "the alignment check never reached the upstream"
    (sent,) = [body for p, body in recorder.sent if p == "/v1/completions"]
    assert sent["prompt"] == ids
    assert sent["max_tokens"] == N_CTX // SLOTS - len(ids)


def test_without_the_check_requests_go_on_while_the_upstream_is_down(
        smollm2_dir: Path) -> None:
    """Switched off, the check gates nothing: the call fails as an unreachable upstream."""
    settings = Settings(upstream=closed_port_url(), tokenizer=smollm2_dir, model=MODEL,
                        alignment_check=False)
    with serving(create_app(settings)) as url, httpx.Client(base_url=url, timeout=30) as http:
        assert http.post("/v1/chat/completions", json=HELLO).status_code == 502
        assert http.get("/health/ready").status_code == 503


def test_a_serving_proxy_lets_a_waiting_thread_have_the_gil_sooner(smollm2_dir: Path) -> None:
    """While the app runs, a thread holds the GIL at most ``GIL_SWITCH_S`` while another
    waits (a request, behind span export); its shutdown gives the process its own back."""
    before = sys.getswitchinterval()
    settings = Settings(upstream=closed_port_url(), tokenizer=smollm2_dir, model=MODEL,
                        alignment_check=False)
    with serving(create_app(settings)):
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_S)
        assert before > GIL_SWITCH_S
    assert sys.getswitchinterval() == before


def test_waiting_requests_share_one_attempt() -> None:
    """Requests that arrive while an attempt runs take its outcome instead of each asking
    the upstream again; the one after a failed attempt asks anew."""
    calls: list[int] = []
    gate = asyncio.Event()

    async def attempt() -> Learned:
        calls.append(len(calls))
        await gate.wait()
        if len(calls) == 1:
            raise UpstreamNotReadyError("down")
        return Learned(alignment=None, context_tokens=7)

    async def scenario() -> None:
        readiness = Readiness(attempt, gated=True)
        waiting = [asyncio.create_task(readiness.ensure()) for _ in range(5)]
        await asyncio.sleep(0)
        gate.set()
        outcomes = await asyncio.gather(*waiting, return_exceptions=True)
        assert all(isinstance(o, UpstreamNotReadyError) for o in outcomes), outcomes
        assert calls == [0]
        await readiness.ensure()
        assert calls == [0, 1] and readiness.learned is not None
        await readiness.ensure()
        assert calls == [0, 1]

    asyncio.run(scenario())
