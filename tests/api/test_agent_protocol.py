"""What today's agents send and what they act on, over real HTTP with the official SDKs.

Claude Code puts ``role: "system"`` messages inside ``messages`` and recovers from errors by
their wording (a shorter history on ``prompt is too long``, a lower ``max_tokens`` on
``input length and `max_tokens` exceed context limit``, no system turns on ``role 'system'
is not supported``); the OpenAI SDKs and Codex read ``code: "context_length_exceeded"``.  The
ids sent upstream are checked against transformers' own ``apply_chat_template`` and the
reference tokenizer.  Every refusal shows in the log, ``/metrics`` and the trace page.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import transformers
from tokenizers import Tokenizer

from app.config import Settings
from app.main import create_app
from tests.api.servers import StubUpstream, serving

MODEL = "m"
ENV = "<env>\nWorking directory: /tmp/project\nPlatform: linux\n</env>"


@pytest.fixture(scope="module")
def qwen3_dir(assets: dict[str, Path]) -> Path:
    return assets["qwen3"].parent


@functools.cache
def hf(folder: Path) -> Any:
    return transformers.AutoTokenizer.from_pretrained(str(folder))


def reference_ids(folder: Path, messages: list[dict[str, Any]], **options: Any) -> list[int]:
    """transformers renders, HF ``tokenizers`` encodes: the contract, from outside the proxy."""
    text = hf(folder).apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                          **options)
    ids: list[int] = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(
        text, add_special_tokens=False).ids
    return ids


@contextmanager
def proxy(upstream: str, folder: Path, *, context: int | None = None,
          **options: Any) -> Iterator[tuple[str, Any]]:
    """A proxy on ``upstream``; ``context`` stands for what the upstream reported at startup."""
    settings = Settings(upstream=upstream, tokenizer=folder, model=MODEL,
                        **{"alignment_check": False, **options})
    app = create_app(settings)
    with serving(app) as url:
        if context is not None:
            service = app.state.chat
            service.card = dataclasses.replace(service.card, context_tokens=context)
        yield url, app


def anthropic_sdk(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0, timeout=60)


def openai_sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, timeout=60)


# --- mid-conversation system turns ------------------------------------------------------


def claude_code_body(*later: dict[str, Any]) -> dict[str, Any]:
    """The shape Claude Code sends for a model it does not know: its environment block as a
    system message after the first user message."""
    return {
        "model": MODEL, "max_tokens": 8, "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Say hello"}]},
            {"role": "system", "content": [{"type": "text", "text": ENV}]},
            *later,
        ],
    }


def test_system_turns_inside_messages_render_where_they_stand(qwen3_dir: Path) -> None:
    stub = StubUpstream(pieces=["Hello"])
    first = claude_code_body()
    second = claude_code_body(
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
        {"role": "system", "content": "Reminder: stay brief."},
        {"role": "user", "content": "Again"},
    )
    session = {"x-claude-code-session-id": "mid-system"}
    with stub.serve() as upstream, proxy(upstream, qwen3_dir) as (url, _):
        replies = [httpx.post(url + "/v1/messages", json=body, headers=session, timeout=60)
                   for body in (first, second)]
    assert [r.status_code for r in replies] == [200, 200], replies[0].text
    assert [r.headers["x-toksplice-route"] for r in replies] == ["full", "append"]
    expected = [
        [{"role": "system", "content": "Be brief."},
         {"role": "user", "content": "Say hello"},
         {"role": "system", "content": ENV}],
        [{"role": "system", "content": "Be brief."},
         {"role": "user", "content": "Say hello"},
         {"role": "system", "content": ENV},
         {"role": "assistant", "content": "Hello"},
         {"role": "system", "content": "Reminder: stay brief."},
         {"role": "user", "content": "Again"}],
    ]
    assert [r["prompt"] for r in stub.requests] == [reference_ids(qwen3_dir, m) for m in expected]
    text = hf(qwen3_dir).decode(stub.requests[1]["prompt"])
    assert "<|im_end|>\n<|im_start|>system\n<env>" in text  # a system turn after the user's


REFUSING = (
    "{% for m in messages %}"
    "{% if m.role == 'system' and not loop.first %}"
    "{{ raise_exception('System role only at the start') }}{% endif %}"
    "{% if m.content == 'boom' %}{{ raise_exception('no booms') }}{% endif %}"
    "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def claude_code_falls_back(message: str) -> bool:
    """Claude Code 2.1.328's test for "resend without system turns" (read from its binary):
    "not supported" beside ``role 'system'``, or Anthropic's older "Unexpected role"."""
    unexpected = "Unexpected role" in message and "input message role" in message
    return unexpected or ("not supported" in message
                          and re.search(r"role .{0,2}system", message, re.I) is not None)


def test_a_template_that_refuses_a_later_system_turn_is_answered_as_anthropic_does(
    qwen3_dir: Path, tmp_path: Path
) -> None:
    template = tmp_path / "refusing.jinja"
    template.write_text(REFUSING)
    stub = StubUpstream(pieces=["Hi"])
    without = claude_code_body()
    without["messages"] = without["messages"][:1]
    boom = claude_code_body({"role": "user", "content": "boom"})
    with stub.serve() as upstream, proxy(upstream, qwen3_dir, chat_template=template) as (url, _):
        refused = httpx.post(url + "/v1/messages", json=claude_code_body(), timeout=60)
        fallback = httpx.post(url + "/v1/messages", json=without, timeout=60)
        other = httpx.post(url + "/v1/messages", json=boom, timeout=60)
        chat = httpx.post(url + "/v1/chat/completions", timeout=60, json={
            "model": MODEL, "messages": [{"role": "user", "content": "hi"},
                                         {"role": "system", "content": "x"}]})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error" and claude_code_falls_back(error["message"])
    assert fallback.status_code == 200  # what Claude Code sends next
    # without its system turns the template still raises: its own words, no fallback asked
    assert other.status_code == 400 and "System role only" in other.json()["error"]["message"]
    assert not claude_code_falls_back(other.json()["error"]["message"])
    assert chat.status_code == 400 and chat.json()["error"]["param"] == "messages[1]"
    assert len(stub.requests) == 1


def test_the_fallback_test_can_fail() -> None:
    assert claude_code_falls_back("role 'system' is not supported on this model")
    assert not claude_code_falls_back("messages.1.role: Input should be 'user' or 'assistant'")


# --- context overflow, worded as each client's server words it --------------------------


def long_messages(words: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "word " * words}]


def test_context_overflow_in_anthropic_wording_before_the_upstream(qwen3_dir: Path) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, qwen3_dir, context=512) as (url, _):
        client = anthropic_sdk(url)
        with pytest.raises(anthropic.BadRequestError) as long:
            client.messages.create(model=MODEL, max_tokens=10, messages=long_messages(600))
        with pytest.raises(anthropic.BadRequestError) as greedy:
            client.messages.create(model=MODEL, max_tokens=500, messages=long_messages(100))
        counted = client.messages.count_tokens(model=MODEL, messages=long_messages(600))
        fits = client.messages.create(model=MODEL, max_tokens=10, messages=long_messages(100))
    message = long.value.body["error"]["message"]
    match = re.fullmatch(r"prompt is too long: (\d+) tokens > (\d+) maximum", message)
    assert match and int(match[1]) > 600 and int(match[2]) == 511, message
    assert long.value.body["error"]["type"] == "invalid_request_error"
    message = greedy.value.body["error"]["message"]
    # the pattern Claude Code parses to lower max_tokens and resend
    found = re.search(r"input length and `max_tokens` exceed context limit: (\d+) \+ (\d+) > "
                      r"(\d+)", message)
    assert found and int(found[2]) == 500 and int(found[3]) == 512, message
    assert int(found[1]) + 500 > 512 >= int(found[1])
    assert counted.input_tokens > 600  # counting is not refused
    assert fits.content and len(stub.requests) == 1


def test_context_overflow_is_context_length_exceeded_for_openai_clients(
    qwen3_dir: Path,
) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, qwen3_dir, context=512) as (url, _):
        client = openai_sdk(url)
        with pytest.raises(openai.BadRequestError) as chat:
            client.chat.completions.create(model=MODEL, messages=long_messages(600))  # type: ignore[arg-type]
        with pytest.raises(openai.BadRequestError) as completion:
            client.chat.completions.create(model=MODEL, messages=long_messages(100),  # type: ignore[arg-type]
                                           max_tokens=1000)
        with pytest.raises(openai.BadRequestError) as responses:
            client.responses.create(model=MODEL, input="word " * 600)
        streamed = list(client.responses.create(model=MODEL, input="word " * 600, stream=True))
    for raised, param in ((chat, "messages"), (completion, "messages"), (responses, "input")):
        assert raised.value.code == "context_length_exceeded"
        assert raised.value.param == param
        assert raised.value.type == "invalid_request_error"
    assert "maximum context length is 512 tokens" in chat.value.message
    assert "1000 in the completion" in completion.value.message
    assert "context window" in responses.value.message
    # streamed, OpenAI answers it as response.failed, where Codex reads the code
    assert [e.type for e in streamed] == ["response.created", "response.in_progress",
                                          "response.failed"]
    error = streamed[-1].response.error  # type: ignore[union-attr]
    assert error is not None and error.code == "context_length_exceeded"
    assert "context window" in error.message
    assert stub.requests == []


# --- every refusal seen -----------------------------------------------------------------


def test_every_refusal_is_logged_counted_and_on_the_trace_page(
    qwen3_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stub = StubUpstream()
    caplog.set_level(logging.INFO, logger="toksplice")
    bad_role = {"model": MODEL, "max_tokens": 5,
                "messages": [{"role": "wizard", "content": "secret words"}]}
    with stub.serve() as upstream, proxy(upstream, qwen3_dir) as (url, _), \
            httpx.Client(base_url=url, timeout=30) as http:
        assert http.post("/v1/messages", json=bad_role).status_code == 400
        assert http.post("/v1/chat/completions", content=b"{not json").status_code == 400
        assert http.post("/v1/responses", json={"model": "other", "input": "x"}).status_code == 404
        assert http.get("/v1/nothing").status_code == 404
        metrics = http.get("/metrics").text
        traces = http.get("/debug/traces.json").json()
    for api, status, reason in (("messages", 400, "bad_request"), ("chat", 400, "bad_request"),
                                ("responses", 404, "not_found"), ("chat", 404, "no_route")):
        line = (f'toksplice_refusals_total{{api="{api}",reason="{reason}",status="{status}"}} '
                "1.0")
        assert line in metrics, (line, metrics)
    refused = traces["refused"]
    assert [(r["api"], r["status"], r["path"]) for r in refused] == [
        ("chat", 404, "/v1/nothing"), ("responses", 404, "/v1/responses"),
        ("chat", 400, "/v1/chat/completions"), ("messages", 400, "/v1/messages")]
    assert refused[-1]["param"] == "messages.0.role"
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused ")]
    assert len(lines) == 4
    assert "api=messages status=400 reason=bad_request path=/v1/messages" in lines[0]
    assert not any("secret words" in line for line in lines)  # no content in the log


# --- smaller things both SDKs do --------------------------------------------------------


def test_models_retrieve_works_in_both_sdks(qwen3_dir: Path) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, qwen3_dir, context=4096) as (url, _):
        assert openai_sdk(url).models.retrieve(MODEL).id == MODEL
        assert anthropic_sdk(url).models.retrieve(MODEL).id == MODEL
        card = httpx.get(url + f"/v1/models/{MODEL}").json()
        missing = httpx.get(url + "/v1/models/other")
    assert card["context_window"] == 4096
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "model_not_found"


def test_count_tokens_server_timing_is_never_negative(qwen3_dir: Path) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, qwen3_dir) as (url, _):
        reply = httpx.post(url + "/v1/messages/count_tokens", timeout=30, json={
            "model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    assert reply.status_code == 200
    timings = dict(re.findall(r"(\w+);dur=(-?[\d.]+)", reply.headers["server-timing"]))
    assert set(timings) >= {"tokenize", "proxy"}
    assert all(float(v) >= 0 for v in timings.values()), timings
    assert float(timings["proxy"]) >= float(timings["tokenize"])
