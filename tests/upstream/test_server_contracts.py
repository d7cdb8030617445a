"""The dialects against the servers' own released schemas, not our reading of them.

SGLang: its generated API module (``sglang/api/v1/api_types.py``, msgspec and the standard
library only) is loaded from the pinned wheel and decodes every body a dialect can build, as
SGLang's ``/generate`` does before anything else (unknown sampling keys are refused there).
vLLM: its pydantic models need torch, so ``server_schemas`` reads their fields with ``ast``;
the checked-in fixture must equal what the pinned wheel holds, and every key we send must be
a declared field of a compatible type.  Answers written from both servers' source
(``server_answers``) must be valid under the same schemas, and parse through our dialects and
the proxy to the text and usage the client should see.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from tokenizers import Tokenizer

from app.config import Settings
from app.generation import OutputFormat, Sampling
from app.main import create_app
from app.protocol.chat_fields import PASSED_THROUGH
from app.upstream import Prompt, UpstreamCall, dialect_named
from tests.api.servers import serving
from tests.upstream import server_answers as answers
from tests.upstream.server_schemas import CLASSES, FIXTURE, extract
from tests.upstream.server_schemas import errors as schema_errors

SCHEMA = json.loads(FIXTURE.read_text())
EXTRAS = {"top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 2,
          "ignore_eos": False}
"""A value for each field the chat API passes through as given."""
FULL = Sampling(max_tokens=7, temperature=0.3, top_p=0.9, stop=["\n\n", "END"], seed=42,
                presence_penalty=0.1, frequency_penalty=0.2, logit_bias={"5": -100.0},
                extra=EXTRAS)
MESSAGES = [{"role": "user", "content": "Hi"}]


def calls() -> Iterator[UpstreamCall]:
    """Every kind of call a dialect builds: streamed or not, with and without the client's
    sampling fields, with and without a known context, ids or text."""
    for stream, sampling, room, as_text in itertools.product(
            (False, True), (Sampling(), FULL), (None, 100), (False, True)):
        chat = {"model": "m", "messages": MESSAGES, "stream": stream}
        yield UpstreamCall(model="m", prompt=Prompt(b"1,2,3", 3, "abc", as_text=as_text),
                           sampling=sampling, stream=stream, chat_body=chat, room=room)


def bodies(dialect: str) -> Iterator[tuple[UpstreamCall, dict[str, Any]]]:
    for call in calls():
        if dialect == "vllm-generate" and call.prompt.as_text:
            continue  # refused before anything is sent (tokens only)
        yield call, orjson.loads(bytes(dialect_named(dialect).request(call)[1]))


def test_every_pass_through_field_is_covered() -> None:
    assert set(EXTRAS) == set(PASSED_THROUGH)


# --- vLLM ------------------------------------------------------------------------------


def test_the_vllm_fixture_is_what_the_pinned_wheel_declares(assets: dict[str, Path]) -> None:
    assert extract({key: assets[key] for key in CLASSES}) == SCHEMA, (
        "vLLM's models changed: run `python -m tests.upstream.server_schemas` and check "
        "every field the vLLM dialects send")


@pytest.mark.parametrize(("dialect", "model"), [("vllm-completions", "CompletionRequest"),
                                                ("vllm-generate", "GenerateRequest"),
                                                ("vllm-chat", "ChatCompletionRequest")])
def test_every_vllm_body_is_a_declared_request(dialect: str, model: str) -> None:
    for _, body in bodies(dialect):
        assert schema_errors(SCHEMA, model, body) == [], body
    vllm = dialect_named(dialect)
    for path, request in (vllm.tokenize_request("text", "m"), vllm.context_request("m")):
        assert path == "/tokenize" and request is not None
        assert schema_errors(SCHEMA, "TokenizeCompletionRequest", orjson.loads(request)) == []


def test_the_checker_refuses_what_vllm_does_not_declare() -> None:
    assert schema_errors(SCHEMA, "CompletionRequest", {"min_new_tokens": 2})
    assert schema_errors(SCHEMA, "GenerateRequest", {"sampling_params": {"max_tokens": "9"}})
    assert schema_errors(SCHEMA, "CompletionRequest", {"stream_options": {"usage": True}})


@pytest.mark.parametrize(("dialect", "limit"), [("vllm-completions", ("max_tokens",)),
                                                ("vllm-generate", ("sampling_params",
                                                                   "max_tokens"))])
def test_vllm_calls_without_a_client_limit_ask_for_the_room_left(
        dialect: str, limit: tuple[str, ...]) -> None:
    """vLLM's own default is 16 tokens (null too): the limit is the context left instead."""
    model = "CompletionRequest" if dialect == "vllm-completions" else "SamplingParams"
    assert SCHEMA[model]["max_tokens"]["default"] == 16
    for call, body in bodies(dialect):
        value: Any = body
        for key in limit:
            value = value.get(key, {}) if isinstance(value, dict) else None
        want = call.sampling.max_tokens or call.room
        assert value == (want if want is not None else {}), (call, body)


def test_vllm_answers_are_declared_responses(smollm2_dir: Path) -> None:
    ids = output_ids(smollm2_dir, "Hi there.")
    cases = [("CompletionResponse", answers.vllm_completion("Hi", 3, "END")),
             ("GenerateTokensResponse", answers.vllm_generate(ids, 3, 151645))]
    cases += [("CompletionStreamResponse", c)
              for c in answers.vllm_completion_stream(["Hi", " there"], 3, None, True)]
    cases += [("GenerateTokensStreamResponse", c)
              for c in answers.vllm_generate_stream(ids, 3, "there.")]
    for model, payload in cases:
        assert schema_errors(SCHEMA, model, payload) == [], payload


@pytest.mark.parametrize(("stop_reason", "stop"), [("END", "END"), (151645, None), (None, None)])
def test_vllm_stop_reason_is_a_string_or_a_token_id(stop_reason: Any, stop: str | None) -> None:
    chunks = answers.vllm_completion_stream(["Hi", " there"], 3, stop_reason, True)
    vllm = dialect_named("vllm-completions")
    pieces = [vllm.event(c, 3) for c in chunks]
    assert "".join(p.text for p in pieces) == "Hi there"
    assert [p.finish_reason for p in pieces] == [None, "stop", None]
    assert [p.usage for p in pieces][:2] == [None, None] and pieces[-1].usage is not None
    assert pieces[-1].usage.cached_tokens == answers.CACHED
    assert pieces[1].stop_sequence == stop
    whole = vllm.response(answers.vllm_completion("Hi", 3, stop_reason), 3)
    assert whole.stop_sequence == stop and whole.usage is not None


# --- SGLang ----------------------------------------------------------------------------


def test_every_sglang_body_decodes_as_sglang_does(sglang_api: ModuleType) -> None:
    for call, body in bodies("sglang"):
        decoded = sglang_api.GenerateRequest.from_json_value(body)
        params = decoded.sampling_params
        assert params.max_new_tokens == call.sampling.max_tokens  # null: until the context ends
        assert (decoded.text is None) is (not call.prompt.as_text)
        if call.sampling is FULL:
            assert params.min_new_tokens == EXTRAS["min_tokens"]
            assert params.sampling_seed == FULL.seed and params.top_k == EXTRAS["top_k"]
            assert params.stop == FULL.stop and params.logit_bias == FULL.logit_bias


def test_sglang_refuses_openai_names(sglang_api: ModuleType) -> None:
    """What the dialect's renames avoid: SGLang's 400 for an undeclared sampling key."""
    with pytest.raises(sglang_api.JsonContractError, match="unknown field `min_tokens`"):
        sglang_api.GenerateRequest.from_json_value(
            {"input_ids": [1], "sampling_params": {"min_tokens": 2}})


SGLANG_FINISH = [{"type": "stop", "matched": "\n\n"}, {"type": "stop", "matched": 2},
                 {"type": "length", "length": 3}]


@pytest.mark.parametrize("incremental", [False, True])
@pytest.mark.parametrize("finish", SGLANG_FINISH)
def test_sglang_answers_decode_and_parse(sglang_api: ModuleType, incremental: bool,
                                         finish: dict[str, Any]) -> None:
    pieces, ids = ["Hi", " there", "!"], [10, 11, 12]
    events = answers.sglang_stream(pieces, ids, 3, finish, incremental=incremental)
    whole = answers.sglang_answer(pieces, ids, 3, finish)
    for payload in [*events, whole]:
        sglang_api.GenerateResponse.from_json_value(payload)
    sglang = dialect_named("sglang")
    parsed = [sglang.event(e, 3) for e in events]
    assert [p.cumulative for p in parsed] == [True, not incremental, not incremental]
    last, answer = parsed[-1], sglang.response(whole, 3)
    for generated in (last, answer):
        assert generated.finish_reason == ("length" if finish["type"] == "length" else "stop")
        assert generated.usage is not None and generated.usage.completion_tokens == 3
        assert generated.stop_sequence == (finish["matched"] if finish.get("matched") == "\n\n"
                                           else None)
    assert answer.text == "Hi there!"


# --- through the proxy -----------------------------------------------------------------


def output_ids(folder: Path, text: str) -> list[int]:
    ids: list[int] = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(
        text, add_special_tokens=False).ids
    return ids


@contextmanager
def replaying(folder: Path, dialect: str, path: str, whole: dict[str, Any],
              events: list[dict[str, Any]]) -> Iterator[httpx.Client]:
    """The proxy in front of an upstream that answers ``path`` with these recorded answers."""
    async def answer(request: Request) -> Response:
        if not orjson.loads(await request.body())["stream"]:
            return JSONResponse(whole)

        async def sse() -> AsyncIterator[bytes]:
            for event in events:
                yield b"data: " + orjson.dumps(event) + b"\n\n"
            yield b"data: [DONE]\n\n"
        return StreamingResponse(sse(), media_type="text/event-stream")

    upstream_app = Starlette(routes=[Route(path, answer, methods=["POST"])])
    with serving(upstream_app) as upstream:
        settings = Settings(upstream=upstream, tokenizer=folder, model="m", dialect=dialect,
                            alignment_check=False, tool_format=None, reasoning=False)
        with serving(create_app(settings)) as url, httpx.Client(base_url=url, timeout=30) as c:
            yield c


def chat(http: httpx.Client, stream: bool, **fields: Any) -> tuple[str, dict[str, Any]]:
    """The answer's content and its last chunk (or the whole answer)."""
    body = {"model": "m", "messages": MESSAGES, "stream": stream, **fields}
    if not stream:
        reply = http.post("/v1/chat/completions", json=body)
        assert reply.status_code == 200, reply.text
        answer = reply.json()
        return answer["choices"][0]["message"]["content"], answer
    body["stream_options"] = {"include_usage": True}
    with http.stream("POST", "/v1/chat/completions", json=body) as reply:
        lines = [line[6:] for line in reply.iter_lines() if line.startswith("data: ")]
    chunks = [orjson.loads(line) for line in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    return text, chunks[-1]


@pytest.mark.parametrize("stream", [False, True])
def test_vllm_generate_answers_end_before_the_stop_string(smollm2_dir: Path,
                                                          stream: bool) -> None:
    """The ids keep the token that completed "there." (spread over two tokens): the client
    sees only the text before it, streamed or whole."""
    ids = output_ids(smollm2_dir, "Hi there.")
    whole = answers.vllm_generate(ids, 3, "there.")
    events = answers.vllm_generate_stream(ids, 3, "there.")
    with replaying(smollm2_dir, "vllm-generate", "/inference/v1/generate", whole,
                   events) as http:
        text, last = chat(http, stream, stop=["there."])
    assert text == "Hi "
    assert (last["choices"][0] if not stream else {"finish_reason": "stop"})["finish_reason"] \
        == "stop"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("incremental", [False, True])
def test_sglang_text_streamed_either_way(smollm2_dir: Path, stream: bool,
                                         incremental: bool) -> None:
    pieces = ["Hi", " there", ", ", "Hi", " there"]  # repeats: no guessing from the text
    ids = list(range(10, 10 + len(pieces)))
    finish = {"type": "stop", "matched": 2}
    events = answers.sglang_stream(pieces, ids, 3, finish, incremental=incremental)
    with replaying(smollm2_dir, "sglang", "/generate", answers.sglang_answer(
            pieces, ids, 3, finish), events) as http:
        text, _ = chat(http, stream)
    assert text == "".join(pieces)


def test_vllm_usage_comes_from_its_last_chunk(smollm2_dir: Path) -> None:
    events = answers.vllm_completion_stream(["Hi", " there"], 3, None, include_usage=True)
    with replaying(smollm2_dir, "vllm-completions", "/v1/completions",
                   answers.vllm_completion("Hi there", 3, None), events) as http:
        text, last = chat(http, True)
    assert text == "Hi there" and last["choices"] == []
    assert last["usage"]["completion_tokens"] == 2
    assert last["usage"]["prompt_tokens_details"] == {"cached_tokens": answers.CACHED}


def test_each_dialect_reads_the_context_its_server_reports(sglang_api: ModuleType) -> None:
    tokenize = answers.vllm_tokenize(32768)
    assert schema_errors(SCHEMA, "TokenizeResponse", tokenize) == []
    for dialect in ("vllm-completions", "vllm-generate", "vllm-chat"):
        assert dialect_named(dialect).context_response(tokenize, "m") == 32768
    models = answers.sglang_models(40960)
    for card in models["data"]:
        sglang_api.ModelCard.from_json_value(card)
    sglang = dialect_named("sglang")
    assert sglang.context_request("m") == ("/v1/models", None)
    assert sglang.context_response(models, "m") == 40960
    assert sglang.context_response({"object": "list", "data": []}, "m") is None


# --- output formats and log probabilities ------------------------------------------------

FORMATS = [OutputFormat("json", {"type": "object", "properties": {"a": {"type": "integer"}}},
                        "response_format"),
           OutputFormat("json", None, "response_format"),
           OutputFormat("regex", "[a-z]+", "structured_outputs.regex"),
           OutputFormat("choice", ["yes", "no"], "structured_outputs.choice"),
           OutputFormat("grammar", 'root ::= "a"', "structured_outputs.grammar")]


def formatted(fmt: OutputFormat, logprobs: int | None) -> UpstreamCall:
    sampling = Sampling(max_tokens=5, output_format=fmt, logprobs=logprobs)
    return UpstreamCall(model="m", prompt=Prompt(b"1,2", 2, ""), sampling=sampling,
                        stream=False)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.kind)
def test_vllm_takes_every_format_as_declared(fmt: OutputFormat) -> None:
    body = orjson.loads(bytes(dialect_named("vllm-completions").request(formatted(fmt, 2))[1]))
    assert schema_errors(SCHEMA, "CompletionRequest", body) == []
    assert schema_errors(SCHEMA, "StructuredOutputsParams", body["structured_outputs"]) == []
    assert body["logprobs"] == 2
    (key, value), = body["structured_outputs"].items()
    assert value == (True if key == "json_object" else fmt.value)
    generate = dialect_named("vllm-generate")
    params = orjson.loads(bytes(generate.request(formatted(fmt, None))[1]))["sampling_params"]
    assert schema_errors(SCHEMA, "SamplingParams", params) == []
    assert params["structured_outputs"] == body["structured_outputs"]
    params = orjson.loads(bytes(generate.request(formatted(fmt, 3))[1]))["sampling_params"]
    assert schema_errors(SCHEMA, "SamplingParams", params) == [] and params["logprobs"] == 3


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.kind)
def test_sglang_takes_every_format_as_it_decodes_it(sglang_api: ModuleType,
                                                    fmt: OutputFormat) -> None:
    sglang = dialect_named("sglang")
    body = orjson.loads(bytes(sglang.request(formatted(fmt, None))[1]))
    params = sglang_api.GenerateRequest.from_json_value(body).sampling_params
    if fmt.kind == "json":
        assert json.loads(params.json_schema) == (fmt.value or {"type": "object"})
    else:
        attribute = {"grammar": "ebnf"}.get(fmt.kind, fmt.kind)
        assert getattr(params, attribute) == fmt.value
    asked = sglang_api.GenerateRequest.from_json_value(
        orjson.loads(bytes(sglang.request(formatted(fmt, 2))[1])))
    assert asked.return_logprob is True and asked.top_logprobs_num == 2
    assert asked.logprob_start_len == -1 and asked.return_text_in_logprobs is True


def test_vllm_completion_logprobs_are_declared_and_read() -> None:
    answer = answers.vllm_completion("Hi there", 3, None)
    answer["choices"][0]["logprobs"] = {
        "text_offset": [0, 2], "tokens": ["Hi", " there"], "token_logprobs": [-0.5, None],
        "top_logprobs": [{"Hi": -0.5, "Hello": -1.5}, {" there": -0.1, "!": -3.0}]}
    assert schema_errors(SCHEMA, "CompletionResponse", answer) == []
    assert schema_errors(SCHEMA, "CompletionLogProbs", answer["choices"][0]["logprobs"]) == []
    tokens = dialect_named("vllm-completions").response(answer, 3).logprobs
    assert [(t.token, t.logprob, t.bytes) for t in tokens] == [
        ("Hi", -0.5, b"Hi"), (" there", -9999.0, b" there")]
    assert [[a.token for a in t.top] for t in tokens] == [["Hi", "Hello"], [" there", "!"]]


def test_vllm_generate_logprobs_are_declared_and_spelled_by_us(smollm2_dir: Path) -> None:
    """Tokens out: vLLM reports ids and log probabilities; the client sees each token's text
    (decoded alone), its alternatives ranked (vLLM lists the sampled one first)."""
    ids = output_ids(smollm2_dir, "Hi there.")
    tokenizer = Tokenizer.from_file(str(smollm2_dir / "tokenizer.json"))

    def logprobs(position: int) -> dict[str, Any]:
        sampled = {"token_id": ids[position], "logprob": -2.0, "rank": 3}
        top = [sampled, {"token_id": 300, "logprob": -0.5, "rank": 1},
               {"token_id": 301, "logprob": -1.0, "rank": 2}]
        return {"content": [sampled | {"top_logprobs": top}]}

    whole = answers.vllm_generate(ids, 3, None)
    whole["choices"][0]["logprobs"] = {"content": [c for k in range(len(ids))
                                                   for c in logprobs(k)["content"]]}
    events = answers.vllm_generate_stream(ids, 3, None)
    for k, event in enumerate(events[:-1]):
        event["choices"][0]["logprobs"] = logprobs(k)
    for model, payload in [("GenerateTokensResponse", whole),
                           *(("GenerateTokensStreamResponse", e) for e in events)]:
        assert schema_errors(SCHEMA, model, payload) == [], payload
    spelled = [tokenizer.decode([i], skip_special_tokens=False) for i in ids]
    with replaying(smollm2_dir, "vllm-generate", "/inference/v1/generate", whole,
                   events) as http:
        for stream in (False, True):
            content = _client_logprobs(http, stream=stream, top=2)
            assert [t["token"] for t in content] == spelled
            assert [t["logprob"] for t in content] == [-2.0] * len(ids)
            assert [[a["token"] for a in t["top_logprobs"]] for t in content] == [
                [tokenizer.decode([300]), tokenizer.decode([301])]] * len(ids)


def _client_logprobs(http: Any, *, stream: bool, top: int) -> list[dict[str, Any]]:
    """The ``logprobs.content`` entries a chat client got, whole or streamed, in order."""
    body = {"model": "m", "messages": MESSAGES, "stream": stream, "logprobs": True,
            "top_logprobs": top}
    reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    lines = [orjson.loads(line[6:]) for line in reply.text.splitlines()
             if line.startswith("data: {")] if stream else [reply.json()]
    return [t for c in lines if c["choices"]
            for t in (c["choices"][0]["logprobs"] or {}).get("content") or []]

@pytest.mark.parametrize("incremental", [False, True])
def test_sglang_logprobs_decode_and_reach_the_client(sglang_api: ModuleType, smollm2_dir: Path,
                                                     incremental: bool) -> None:
    """SGLang's [log probability, token id, text] entries, cumulative or incremental like its
    text, reach a chat client once per token, in order, whole and streamed."""
    pieces, ids = ["Hi", " there", "!"], [10, 11, 12]
    entries = [[-0.25 * (k + 1), ids[k], pieces[k]] for k in range(3)]
    tops = [[[-0.1, 99, "x"], entries[k]] for k in range(3)]
    finish = {"type": "length", "length": 3}
    events = answers.sglang_stream(pieces, ids, 3, finish, incremental=incremental)
    for k, event in enumerate(events):
        shown = slice(k, k + 1) if incremental else slice(0, k + 1)
        event["meta_info"] |= {"output_token_logprobs": entries[shown],
                               "output_top_logprobs": tops[shown]}
    whole = answers.sglang_answer(pieces, ids, 3, finish)
    whole["meta_info"] |= {"output_token_logprobs": entries, "output_top_logprobs": tops}
    for payload in [*events, whole]:
        sglang_api.GenerateResponse.from_json_value(payload)
    with replaying(smollm2_dir, "sglang", "/generate", whole, events) as http:
        for stream in (False, True):
            content = _client_logprobs(http, stream=stream, top=1)
            assert [(t["token"], t["logprob"]) for t in content] == [
                (p, -0.25 * (k + 1)) for k, p in enumerate(pieces)]
            assert all(t["top_logprobs"] == [{"token": "x", "logprob": -0.1,
                                              "bytes": [120]}] for t in content)
