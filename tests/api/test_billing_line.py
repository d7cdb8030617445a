"""``--strip-billing-line`` through the proxy: ``auto`` resolved by the dialect (vLLM's
servers drop Claude Code's billing line, the others keep it, and vLLM keeps it for gpt-oss,
which it renders with openai-harmony), the resolved value in ``/health``, and nothing a session
remembers changing the ids: a Claude Code session whose billing line changes every call sends,
call by call, what a fresh process sends (Anthropic and chat APIs, strip on and off); on, the
line is gone and every continuation an append."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from app.protocol.anthropic_request import to_chat_body
from app.protocol.billing_line import HEADER
from tests.api.servers import StubUpstream
from tests.api.test_anthropic import SESSION, fixture, turns
from tests.api.test_faults import MODEL, proxy


@pytest.fixture(scope="module")
def qwen3_dir(assets: dict[str, Path]) -> Path:
    return assets["qwen3"].parent


@pytest.mark.parametrize(
    ("dialect", "strip", "tool_format", "stripped"),
    [
        ("llamacpp", "auto", "hermes", False),
        ("sglang", "auto", "hermes", False),
        ("vllm-completions", "auto", "hermes", True),
        ("vllm-generate", "auto", "hermes", True),
        ("vllm-completions", "auto", "harmony", False),  # vLLM renders gpt-oss with harmony
        ("vllm-completions", "off", "hermes", False),
        ("llamacpp", "on", "hermes", True),
    ],
)
def test_health_shows_the_resolved_setting(
    qwen3_dir: Path, dialect: str, strip: str, tool_format: str, stripped: bool
) -> None:
    stub = StubUpstream()
    settings = {"dialect": dialect, "strip_billing_line": strip, "tool_format": tool_format}
    with stub.serve() as upstream, proxy(upstream, qwen3_dir, **settings) as http:
        assert http.get("/health").json()["strip_billing_line"] is stripped


def _payload(api: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if api == "anthropic":
        return "/v1/messages", body
    return "/v1/chat/completions", to_chat_body(body).body  # a gateway's translation


@pytest.mark.parametrize("strip", ["auto", "off"])
@pytest.mark.parametrize("api", ["anthropic", "chat"])
def test_a_changed_billing_line_sends_a_fresh_process_s_ids(
    qwen3_dir: Path, api: str, strip: str
) -> None:
    stub = StubUpstream()
    calls = turns(fixture(SESSION, MODEL))[:4]
    assert len({c["system"][0]["text"] for c in calls}) == len(calls)  # a new line each call
    options = {"dialect": "vllm-completions", "strip_billing_line": strip}
    routes, sent = [], []
    with (
        stub.serve() as upstream,
        proxy(upstream, qwen3_dir, **options) as session,
        proxy(upstream, qwen3_dir, **options) as fresh,
    ):
        for k, body in enumerate(calls):
            path, payload = _payload(api, body)
            reply = session.post(path, json=payload, headers={"x-session-id": f"{api}-{strip}"})
            assert reply.status_code == 200, reply.text
            routes.append(reply.headers["x-toksplice-route"])
            sent.append(stub.requests[-1]["prompt"])
            alone = fresh.post(path, json=payload, headers={"authorization": f"Bearer {k}"})
            assert alone.status_code == 200, alone.text
            assert stub.requests[-1]["prompt"] == sent[-1]
    text = Tokenizer.from_file(str(qwen3_dir / "tokenizer.json")).decode(
        sent[-1], skip_special_tokens=False
    )
    assert "You are Claude Code" in text
    if strip == "auto":  # on for vLLM
        assert HEADER not in text
        assert routes == ["full"] + ["append"] * (len(calls) - 1)
    else:
        assert text.count(HEADER) == 1
        assert routes == ["full"] + ["edit"] * (len(calls) - 1)


def test_one_prompt_through_both_apis(qwen3_dir: Path) -> None:
    """Stripped, the Anthropic request and its chat translation render to the same ids."""
    stub = StubUpstream()
    body = turns(fixture(SESSION, MODEL))[2]
    with stub.serve() as upstream, proxy(upstream, qwen3_dir, dialect="vllm-completions") as http:
        for api in ("anthropic", "chat"):
            path, payload = _payload(api, body)
            reply = http.post(path, json=payload, headers={"authorization": f"Bearer {api}"})
            assert reply.status_code == 200, reply.text
    first, second = stub.requests[-2:]
    assert first["prompt"] == second["prompt"]
