"""Each dialect asks its server for what the tool format needs: special tokens kept in the
answer's text (the format's markers are special tokens), and a stop at the format's stop
tokens.  Checked against the servers' released request schemas (vLLM's models read from its
source, SGLang's own decoder) and, for llama.cpp, against the real server over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import orjson
import pytest
from tokenizers import Tokenizer

from app.config import Settings
from app.generation import Sampling
from app.main import create_app
from app.protocol.chat_stream import ChatAssembler
from app.protocol.output.harmony import SPECIAL_TOKENS
from app.service.format_tokens import FormatTokens, format_tokens
from app.service.text_answer import StreamedText, whole_text
from app.tools import assets as app_assets
from app.tools.local_upstream import LocalLlamaServer
from app.upstream import Prompt, UpstreamCall, dialect_named
from app.upstream.stops import StopStrings
from tests.api.servers import StubUpstream, serving
from tests.upstream.server_schemas import FIXTURE
from tests.upstream.server_schemas import errors as schema_errors

SCHEMA = json.loads(FIXTURE.read_text())

STOPS = (200012, 200002)  # <|call|>, <|return|> in o200k_harmony
SKIPPING = {"skip_special_tokens", "spaces_between_special_tokens"}


def calls(**format_needs: Any) -> Iterator[UpstreamCall]:
    for stream in (False, True):
        for stop in ([], ["\n\n"]):  # llama.cpp's calls with a stop string go to /completion
            yield UpstreamCall(
                model="m",
                prompt=Prompt(b"1,2,3", 3, "abc"),
                sampling=Sampling(max_tokens=9, stop=stop),
                stream=stream,
                **format_needs,
            )


def body(dialect: str, call: UpstreamCall) -> dict[str, Any]:
    parsed: dict[str, Any] = orjson.loads(bytes(dialect_named(dialect).request(call)[1]))
    return parsed


def test_vllm_completions_keeps_special_tokens_unspaced_and_stops_at_the_format_s() -> None:
    for call in calls(special_tokens=SPECIAL_TOKENS, stop_token_ids=STOPS):
        sent = body("vllm-completions", call)
        assert schema_errors(SCHEMA, "CompletionRequest", sent) == [], sent
        assert sent["skip_special_tokens"] is False
        assert sent["spaces_between_special_tokens"] is False
        assert sent["stop_token_ids"] == list(STOPS)
    for call in calls():
        assert not (SKIPPING | {"stop_token_ids"}) & set(body("vllm-completions", call))


def test_vllm_generate_stops_at_the_format_s_tokens_and_leaves_detokenizing_to_us() -> None:
    """Its answer is ids (the proxy detokenizes, keeping special tokens itself): only the
    stop tokens are asked for."""
    for call in calls(special_tokens=SPECIAL_TOKENS, stop_token_ids=STOPS):
        sent = body("vllm-generate", call)
        assert schema_errors(SCHEMA, "GenerateRequest", sent) == [], sent
        assert sent["sampling_params"]["stop_token_ids"] == list(STOPS)
        assert not SKIPPING & set(sent["sampling_params"])
    for call in calls():
        assert "stop_token_ids" not in body("vllm-generate", call)["sampling_params"]


def test_vllm_declares_the_fields_with_these_defaults() -> None:
    """What asking changes: vLLM skips special tokens unless told (the completions field's
    null means the server default, True) and spaces them out by default."""
    for model in ("CompletionRequest", "SamplingParams"):
        assert SCHEMA[model]["spaces_between_special_tokens"]["default"] is True
        assert "stop_token_ids" in SCHEMA[model]
    assert SCHEMA["CompletionRequest"]["skip_special_tokens"]["default"] is None
    assert SCHEMA["SamplingParams"]["skip_special_tokens"]["default"] is True


def test_sglang_decodes_the_fields_as_sglang_does(sglang_api: ModuleType) -> None:
    for call in calls(special_tokens=SPECIAL_TOKENS, stop_token_ids=STOPS):
        params = sglang_api.GenerateRequest.from_json_value(body("sglang", call)).sampling_params
        assert params.skip_special_tokens is False
        assert params.spaces_between_special_tokens is False
        assert list(params.stop_token_ids) == list(STOPS)
    for call in calls():
        params = sglang_api.GenerateRequest.from_json_value(body("sglang", call)).sampling_params
        assert params.skip_special_tokens is True and params.stop_token_ids is None


@pytest.mark.parametrize("dialect", ["llamacpp", "llamacpp-completion"])
def test_llamacpp_is_told_the_tokens_to_keep(dialect: str) -> None:
    for call in calls(special_tokens=SPECIAL_TOKENS, stop_token_ids=STOPS):
        sent = body(dialect, call)
        assert sent["preserved_tokens"] == list(SPECIAL_TOKENS)
        assert not (SKIPPING | {"stop_token_ids"}) & set(sent)  # fields it does not have
    for call in calls():
        assert "preserved_tokens" not in body(dialect, call)


def test_vllm_chat_is_left_to_its_own_parsers() -> None:
    call = next(calls(special_tokens=SPECIAL_TOKENS, stop_token_ids=STOPS))
    call = UpstreamCall(
        model="m",
        prompt=call.prompt,
        sampling=call.sampling,
        stream=False,
        chat_body={"messages": [{"role": "user", "content": "Hi"}]},
        special_tokens=SPECIAL_TOKENS,
        stop_token_ids=STOPS,
    )
    assert not (SKIPPING | {"stop_token_ids"}) & set(body("vllm-chat", call))


# --- the real llama.cpp ------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["llamacpp", "llamacpp-completion"])
@pytest.mark.parametrize("stream", [False, True])
def test_llamacpp_writes_the_listed_special_tokens_into_its_text(
    llama_server: LocalLlamaServer, smollm2_dir: Path, dialect: str, stream: bool
) -> None:
    """SmolLM2 ends its turn with the special token ``<|im_end|>``: llama.cpp leaves it out of
    the text, unless the request lists it (then it ends the text, as harmony's ``<|call|>``
    does on a gpt-oss GGUF, whose ``<|channel|>`` and kin llama.cpp always writes)."""
    tokenizer = Tokenizer.from_file(str(smollm2_dir / "tokenizer.json"))
    prompt = "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer.encode(prompt, add_special_tokens=False).ids
    texts = []
    for kept in ((), ("<|im_end|>",)):
        call = UpstreamCall(
            model="m",
            prompt=Prompt(orjson.dumps(ids)[1:-1], len(ids), ""),
            sampling=Sampling(max_tokens=64, temperature=0.0),
            stream=stream,
            special_tokens=kept,
        )
        texts.append(generate(llama_server.url, dialect, call))
    plain, kept_text = texts
    assert "<|im_end|>" not in plain
    assert kept_text.endswith("<|im_end|>") and kept_text.removesuffix("<|im_end|>") == plain


def generate(url: str, dialect: str, call: UpstreamCall) -> str:
    """The answer's text, sent as the dialect builds it and read as the dialect reads it."""
    upstream = dialect_named(dialect)
    path, request = upstream.request(call)
    with httpx.Client(base_url=url, timeout=120) as http:
        if not call.stream:
            return upstream.response(http.post(path, content=bytes(request)).json(), 3).text
        with http.stream("POST", path, content=bytes(request)) as reply:
            events = [
                orjson.loads(line[6:])
                for line in reply.iter_lines()
                if line.startswith("data: ") and line != "data: [DONE]"
            ]
    return "".join(upstream.event(e, 3).text for e in events)


# --- what the service asks for, per format -------------------------------------------------


@pytest.fixture(scope="module")
def gpt_oss(assets_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(app_assets.models(assets_dir, without_npm=True)["gpt_oss"]))


def test_harmony_asks_for_its_markers_and_stops_at_call_and_return(gpt_oss: Tokenizer) -> None:
    needs = format_tokens("harmony", gpt_oss)
    assert needs.special_tokens == SPECIAL_TOKENS and needs.keeps_special_tokens
    assert needs.stop_token_ids == STOPS
    assert [gpt_oss.id_to_token(t) for t in STOPS] == ["<|call|>", "<|return|>"]
    assert needs.control_tokens == SPECIAL_TOKENS  # all special tokens of o200k_harmony


def test_only_the_vocabulary_s_special_tokens_are_control_tokens(gpt_oss: Tokenizer) -> None:
    """Kimi's markers are no tokens of o200k_harmony: kept, not taken out of the text."""
    needs = format_tokens("kimi_k2", gpt_oss)
    assert needs.keeps_special_tokens and needs.control_tokens == ()


def test_plain_text_formats_ask_for_nothing(gpt_oss: Tokenizer) -> None:
    for tool_format in (None, "hermes", "qwen3_coder"):
        assert format_tokens(tool_format, gpt_oss) == FormatTokens()


def test_a_stop_marker_the_vocabulary_lacks_is_not_asked_for(
    gpt_oss: Tokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    """Gemma 4 stops at ``<|tool_response>``, no token of o200k_harmony."""
    needs = format_tokens("gemma4", gpt_oss)
    assert needs.stop_token_ids == () and needs.keeps_special_tokens
    assert "'<|tool_response>' is no token of this tokenizer" in caplog.text


# --- through the proxy ------------------------------------------------------------------------

MISTRAL = "Let me look.[TOOL_CALLS]read[ARGS]{path: a.py}"
"""A Mistral answer whose call is malformed (its arguments are no JSON): text, as vLLM's
completions API returns it when asked to keep special tokens."""


@pytest.mark.parametrize("stream", [False, True])
def test_a_malformed_call_in_special_tokens_reaches_the_client_without_them(
    assets_dir: Path, stream: bool
) -> None:
    """``[TOOL_CALLS]`` is a control token of Mistral's tekken vocabulary: taken out of the
    text; ``[ARGS]`` is no token of this (older) tekken: plain text, kept."""
    stub = StubUpstream(pieces=[MISTRAL[i : i + 5] for i in range(0, len(MISTRAL), 5)])
    tool = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}
    body = {"model": "m", "messages": [{"role": "user", "content": "Read a.py"}],
            "tools": [tool], "stream": stream}  # fmt: skip
    tekken = app_assets.models(assets_dir, without_npm=True)["tekken"].parent
    template = app_assets.templates(assets_dir)["Mistral-Small-3.2-24B-Instruct-2506"]
    with stub.serve() as upstream:
        settings = Settings(upstream=upstream, tokenizer=tekken, chat_template=template, model="m",
                            dialect="vllm-completions", tool_format="mistral",
                            alignment_check=False)  # fmt: skip
        with serving(create_app(settings)) as url, httpx.Client(base_url=url, timeout=60) as c:
            reply = c.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    assert stub.requests[0]["skip_special_tokens"] is False
    if stream:
        chunks = [orjson.loads(line[6:]) for line in reply.text.splitlines()
                  if line.startswith("data: ") and line != "data: [DONE]"]  # fmt: skip
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    else:
        content = reply.json()["choices"][0]["message"]["content"]
    assert content == "Let me look.read[ARGS]{path: a.py}"
    assert "[TOOL_CALLS]" not in reply.text


# --- ids we detokenize ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_ids_we_detokenize_keep_the_format_s_markers_and_lose_the_end_of_turn(
    assets_dir: Path, stream: bool
) -> None:
    """vLLM's generate API returns ids, the end-of-turn ``</s>`` among them: the text keeps
    Mistral's ``[TOOL_CALLS]`` (a special token) so the call is read, and loses ``</s>``."""
    tekken = Tokenizer.from_file(str(app_assets.models(assets_dir, without_npm=True)["tekken"]))
    ids = tekken.encode(
        'Let me look.[TOOL_CALLS]read{"path": "a.py"}</s>', add_special_tokens=False
    ).ids
    assert ids[-1] == tekken.token_to_id("</s>") and tekken.token_to_id("[TOOL_CALLS]") in ids
    needs = format_tokens("mistral", tekken)
    dialect = dialect_named("vllm-generate")
    tool = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}
    assembler = ChatAssembler(
        model="m",
        tools=[tool],
        tool_format="mistral",
        reasoning=True,
        starts_in_reasoning=False,
        control_tokens=needs.control_tokens,
    )
    usage = {"prompt_tokens": 3, "completion_tokens": len(ids), "total_tokens": 3 + len(ids)}
    answer = {"choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}], "usage": usage}
    if stream:
        text = StreamedText(dialect, tekken, assembler, StopStrings([]), 3, needs.dropped_ids)
        chunks = [c for t in ids for c in text.step({"choices": [
            {"index": 0, "token_ids": [t], "finish_reason": None}]})]  # fmt: skip
        last = {"choices": [{"index": 0, "token_ids": [], "finish_reason": "stop"}]}
        chunks += [*text.step(last), *text.end(include_usage=False)]
        deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
        content = "".join(d.get("content") or "" for d in deltas)
        calls = [t["function"] for d in deltas for t in d.get("tool_calls") or ()]
    else:
        message = whole_text(dialect, tekken, assembler, StopStrings([]), answer, 3,
                             needs.dropped_ids)["choices"][0]["message"]  # fmt: skip
        content, calls = message["content"], [c["function"] for c in message["tool_calls"]]
    assert content == "Let me look."
    assert calls == [{"name": "read", "arguments": '{"path": "a.py"}'}]
