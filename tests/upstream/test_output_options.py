"""Nothing silently dropped: an output format and log probabilities reach a real llama.cpp in
its own fields (its grammar then holds the answer to the schema) and its log probabilities
come back in OpenAI chat form, whole and streamed; the Responses and Anthropic APIs' formats
go upstream alike; what a dialect cannot carry is a 400 naming the client's field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from app.api import chat as chat_api
from app.api import messages as messages_api
from app.api import openai_responses as responses_api
from app.config import Settings
from app.main import create_app
from app.tools.local_upstream import LocalLlamaServer
from tests.api.servers import RecordingTransport, serving
from tests.upstream.test_dialects import MODEL, StandIn, proxy

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
HELLO = [{"role": "user", "content": "Is the sky blue? Answer in JSON."}]


@pytest.fixture(scope="module")
def llama(
    llama_server: LocalLlamaServer, smollm2_dir: Path
) -> Iterator[tuple[httpx.Client, RecordingTransport]]:
    recorder = RecordingTransport()
    settings = Settings(
        upstream=llama_server.url, tokenizer=smollm2_dir, model=MODEL, tool_format=None,
        reasoning=False,
    )  # fmt: skip
    with (
        serving(create_app(settings, transport=recorder)) as url,
        httpx.Client(base_url=url, timeout=120) as http,
    ):
        yield http, recorder


def _chat(http: httpx.Client, **fields: Any) -> httpx.Response:
    body = {"model": MODEL, "messages": HELLO, "max_tokens": 30, "temperature": 0} | fields
    return http.post("/v1/chat/completions", json=body)


def test_a_json_schema_holds_the_real_answer(
    llama: tuple[httpx.Client, RecordingTransport],
) -> None:
    http, recorder = llama
    response_format = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}
    reply = _chat(http, response_format=response_format)
    assert reply.status_code == 200, reply.text
    answer = orjson.loads(reply.json()["choices"][0]["message"]["content"])
    assert set(answer) == {"ok"} and isinstance(answer["ok"], bool)
    assert recorder.sent[-1][1]["json_schema"] == SCHEMA


def test_a_grammar_goes_to_llamacpp(llama: tuple[httpx.Client, RecordingTransport]) -> None:
    http, _ = llama
    reply = _chat(http, structured_outputs={"grammar": 'root ::= "yes" | "no"'})
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] in ("yes", "no")


def test_log_probabilities_come_back_in_chat_form(
    llama: tuple[httpx.Client, RecordingTransport],
) -> None:
    http, _ = llama
    reply = _chat(http, logprobs=True, top_logprobs=2, max_tokens=6)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    content = choice["logprobs"]["content"]
    assert len(content) == reply.json()["usage"]["completion_tokens"]
    assert b"".join(bytes(t["bytes"]) for t in content) == choice["message"]["content"].encode()
    for token in content:
        assert token["logprob"] <= 0 and len(token["top_logprobs"]) == 2
        assert set(token["top_logprobs"][0]) == {"token", "logprob", "bytes"}

    body = {"model": MODEL, "messages": HELLO, "max_tokens": 6, "temperature": 0,
            "logprobs": True, "stream": True}  # fmt: skip
    with http.stream("POST", "/v1/chat/completions", json=body) as streamed:
        lines = [line[6:] for line in streamed.iter_lines() if line.startswith("data: ")]
    chunks = [orjson.loads(line) for line in lines[:-1]]
    tokens = [t for c in chunks if c["choices"] for t in ((c["choices"][0]["logprobs"] or {})
                                                          .get("content") or [])]  # fmt: skip
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert [t["token"] for t in tokens] == [t["token"] for t in content]  # temperature 0
    assert b"".join(bytes(t["bytes"]) for t in tokens) == text.encode()
    assert all(t["top_logprobs"] == [] for t in tokens)  # top_logprobs: 0


def test_what_llamacpp_cannot_carry_is_a_400_naming_it(
    llama: tuple[httpx.Client, RecordingTransport],
) -> None:
    http, recorder = llama
    sent = len(recorder.sent)
    for fields, param in (({"structured_outputs": {"regex": "a+"}}, "structured_outputs.regex"),
                          ({"structured_outputs": {"choice": ["a"]}}, "structured_outputs.choice"),
                          ({"top_logprobs": 2}, "top_logprobs"),
                          ({"response_format": {"type": "xml"}}, "response_format")):  # fmt: skip
        reply = _chat(http, **fields)
        assert reply.status_code == 400 and reply.json()["error"]["param"] == param, reply.text
    assert len(recorder.sent) == sent


@pytest.fixture(scope="module")
def stand_in(smollm2_dir: Path) -> Iterator[tuple[httpx.Client, StandIn]]:
    with proxy(smollm2_dir, "llamacpp-completion") as served:
        yield served


def test_responses_and_anthropic_formats_go_upstream(
    stand_in: tuple[httpx.Client, StandIn],
) -> None:
    http, upstream = stand_in
    text_format = {"type": "json_schema", "name": "a", "schema": SCHEMA}
    responses = {"model": MODEL, "input": "Hi", "max_output_tokens": 5,
                 "text": {"format": text_format}}  # fmt: skip
    assert http.post("/v1/responses", json=responses).status_code == 200
    assert upstream.requests[-1][1]["json_schema"] == SCHEMA
    output_config = {"format": {"type": "json_schema", "schema": SCHEMA}}
    anthropic = {"model": MODEL, "max_tokens": 5, "output_config": output_config,
                 "messages": [{"role": "user", "content": "Hi"}]}  # fmt: skip
    assert http.post("/v1/messages", json=anthropic).status_code == 200
    assert upstream.requests[-1][1]["json_schema"] == SCHEMA
    sent = len(upstream.requests)
    reply = http.post("/v1/responses", json=responses | {"top_logprobs": 3})
    assert reply.status_code == 400 and "top_logprobs" in reply.text
    assert len(upstream.requests) == sent


def test_a_translated_format_keeps_the_client_field_name(smollm2_dir: Path) -> None:
    """A Responses or Anthropic format reaches the dialects as a chat ``response_format``; the
    format still names the field the client sent, which a dialect that cannot carry it names
    in its 400 (``output_fields``)."""
    responses = {"model": MODEL, "input": "Hi", "text": {"format": {"type": "json_object"}}}
    anthropic = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}
    beta = {"type": "json_schema", "schema": SCHEMA}
    calls = [
        (responses_api.API, responses, "text.format"),
        (messages_api.API, anthropic | {"output_config": {"format": beta}}, "output_config.format"),
        (messages_api.API, anthropic | {"output_format": beta}, "output_format"),
        (chat_api.API, {"model": MODEL, "messages": HELLO, "response_format": {
            "type": "json_object"}}, "response_format"),
    ]  # fmt: skip
    settings = Settings(upstream="http://127.0.0.1:9", tokenizer=smollm2_dir, model=MODEL,
                        alignment_check=False, tool_format=None)  # fmt: skip
    app = create_app(settings)
    with serving(app):  # the lifespan builds the APIs' parsers
        for api, body, param in calls:
            parsed = api.parser(app).parse(orjson.dumps(body), None)
            fmt = api.call(app, parsed, "key").chat.sampling.output_format
            assert fmt is not None and fmt.param == param
