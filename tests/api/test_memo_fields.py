"""Nothing a session remembers changes an answer, whatever field of the body changes.

``test_memo_validation`` grows and replaces a session's transcript; here every other field
of each API's body changes too (``instructions``, ``system``, tools, tool choice, reasoning
settings, sampling fields, template kwargs, output formats, log probabilities,
``continue_final_message``, metadata and other dropped fields, a refused field), keys come in
any order, and a key may stand twice (read as orjson reads it: the last one).  Each call is
also answered by a second app in a session of its own (a fresh key: nothing of it is
remembered there) and both must agree on the status, the error body and everything sent
upstream, ids included; a refused field is a 400 on every call."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from tests.api.servers import StubUpstream
from tests.api.test_faults import MODEL, proxy
from tests.api.test_memo_validation import anthropic_messages, chat_messages, responses_items

Pairs = list[tuple[str, Any]]
"""A body as its keys stand in the JSON text (a key may stand twice)."""

PIRATE, NINJA = "You are PIRATE bot.", "You are NINJA bot."
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
KV_TRANSFER = {"do_remote_prefill": True, "remote_host": "10.0.0.9"}
CHAT_TOOL = {
    "type": "function",
    "function": {
        "name": "f",
        "description": "d",
        "parameters": {"type": "object", "properties": {"a": {"type": "string"}}},
    },
}
FIELDS: dict[str, dict[str, Any]] = {
    "chat": {
        "tools": st.sampled_from([[CHAT_TOOL], [CHAT_TOOL, {**CHAT_TOOL, "function": {
            "name": "g", "parameters": {"type": "object"}}}], "x"]),
        "tool_choice": st.sampled_from(["auto", "none", {"type": "function",
                                                          "function": {"name": "f"}}]),
        "temperature": st.sampled_from([0.5, 1, True, "hot"]),
        "top_p": st.sampled_from([0.9, 1.0]),
        "max_tokens": st.sampled_from([8, 16, True, 0]),
        "seed": st.sampled_from([1, 2]),
        "stop": st.sampled_from([["x"], "y", 5]),
        "chat_template_kwargs": st.sampled_from([{"enable_thinking": False},
                                                 {"enable_thinking": True}, "bad"]),
        "metadata": st.sampled_from([{"a": "b"}, {"a": "c"}]),
        "add_generation_prompt": st.sampled_from([False, True]),
        "stream": st.sampled_from([False, True]),
        "prompt_cache_key": st.sampled_from(["pck-1", "pck-2"]),
        "response_format": st.sampled_from([{"type": "json_object"}, {"type": "json_schema",
            "json_schema": {"name": "o", "schema": SCHEMA}}, {"type": "text"}]),
        "logprobs": st.sampled_from([True, False]),
        "top_logprobs": st.sampled_from([0, 2]),
        "continue_final_message": st.sampled_from([True, False]),
        "reasoning_effort": st.sampled_from(["none", "high"]),
        "user": st.sampled_from(["u-1", "u-2"]),
    },
    "anthropic": {
        "system": st.sampled_from([PIRATE, NINJA, [{"type": "text", "text": PIRATE}],
                                   [{"type": "text", "text": "x-anthropic-billing-header: a\n"
                                     + NINJA}], 5]),
        "tools": st.sampled_from([[{"name": "f", "description": "d", "input_schema": {
            "type": "object", "properties": {"a": {"type": "string"}}}}], "x"]),
        "tool_choice": st.sampled_from([{"type": "auto"}, {"type": "any"},
                                        {"type": "tool", "name": "f"}]),
        "thinking": st.sampled_from([{"type": "enabled", "budget_tokens": 1024},
                                     {"type": "disabled"}, {"type": "bogus"}]),
        "temperature": st.sampled_from([0.5, 1]),
        "top_k": st.sampled_from([5, 50]),
        "stop_sequences": st.sampled_from([["x"], "x"]),
        "max_tokens": st.sampled_from([8, 16, True]),
        "metadata": st.sampled_from([{"user_id": "u"}, {"user_id": "v"}]),
        "stream": st.sampled_from([False, True]),
        "output_config": st.sampled_from([{"format": {"type": "json_schema", "schema": SCHEMA}},
                                          {"effort": "low"}]),
    },
    "responses": {
        "instructions": st.sampled_from([PIRATE, NINJA, 5]),
        "tools": st.sampled_from([[{"type": "function", "name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "string"}}}}],
            [{"type": "web_search"}], "x"]),
        "tool_choice": st.sampled_from(["auto", "required", {"type": "function", "name": "f"}]),
        "reasoning": st.sampled_from([{"effort": "none"}, {"effort": "high"},
                                      {"effort": "low", "summary": "auto"}]),
        "temperature": st.sampled_from([0.5, 1]),
        "max_output_tokens": st.sampled_from([8, 16, True]),
        "metadata": st.sampled_from([{"a": "b"}, {"a": "c"}]),
        "parallel_tool_calls": st.sampled_from([False, True]),
        "stream": st.sampled_from([False, True]),
        "prompt_cache_key": st.sampled_from(["pck-1", "pck-2"]),
        "text": st.sampled_from([{"format": {"type": "json_object"}}, {"format": {
            "type": "json_schema", "name": "o", "schema": SCHEMA}}, {"verbosity": "low"}]),
        "user": st.sampled_from(["u-1", "u-2"]),
    },
}  # fmt: skip
REFUSED: dict[str, tuple[str, Any]] = {
    "chat": ("kv_transfer_params", KV_TRANSFER),
    "anthropic": ("output_config", {"format": {"type": "json_object"}}),
    "responses": ("top_logprobs", 2),
}
"""Per API a field and value refused on every call (400), whatever the session remembers;
drawn into one body in eight or so (most bodies must be answered for a session to grow)."""
ARRAY = {"chat": "messages", "anthropic": "messages", "responses": "input"}
PATH = {"chat": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}
ITEMS = {"chat": chat_messages, "anthropic": anthropic_messages, "responses": responses_items}
BASE: dict[str, Pairs] = {
    "chat": [("model", MODEL)],
    "anthropic": [("model", MODEL), ("max_tokens", 8)],
    "responses": [("model", MODEL)],
}
keys = itertools.count()


@pytest.fixture(scope="module")
def qwen3_dir(assets: dict[str, Path]) -> Path:
    """Qwen3's template renders tools, reasoning and ``enable_thinking``: every field shows."""
    return assets["qwen3"].parent


def encode(pairs: Pairs) -> bytes:
    """The JSON object with ``pairs`` in order, duplicates kept."""
    return b"{" + b",".join(orjson.dumps(k) + b":" + orjson.dumps(v) for k, v in pairs) + b"}"


def answer(http: httpx.Client, path: str, body: bytes, stub: StubUpstream,
           headers: dict[str, str]) -> tuple[Any, ...]:  # fmt: skip
    """(status, error body, what went upstream) of one call."""
    sent = len(stub.requests)
    reply = http.post(path, content=body, headers={"content-type": "application/json", **headers})
    error = reply.json() if reply.status_code != 200 else None
    upstream = stub.requests[-1] if len(stub.requests) > sent else None
    return reply.status_code, error, upstream


class Upstream(StubUpstream):
    """The stub, also answering llama.cpp's own ``/completion`` (where calls with stop
    strings or log probabilities go): its requests are compared too."""

    def app(self) -> Starlette:
        app = super().app()
        app.add_route("/completion", self._native, methods=["POST"])
        return app

    async def _native(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.requests.append(body)
        last = {"content": "", "stop": True, "stop_type": "eos", "tokens_predicted": 3}
        if not body.get("stream"):
            return JSONResponse(last | {"content": "".join(self.pieces)})
        events = [*({"content": p, "stop": False} for p in self.pieces), last]
        return StreamingResponse(
            (b"data: " + orjson.dumps(e) + b"\n\n" for e in events),
            media_type="text/event-stream",
        )


def fresh_headers() -> dict[str, str]:
    return {"authorization": f"Bearer fresh-{next(keys)}"}


Apps = tuple[StubUpstream, httpx.Client, httpx.Client]


@pytest.fixture(scope="module")
def apps(qwen3_dir: Path) -> Iterator[Apps]:
    """(the upstream, the app that keeps sessions, the app that answers each call fresh):
    each test's sessions have keys of their own."""
    stub = Upstream()
    with stub.serve() as upstream, proxy(upstream, qwen3_dir) as session, \
            proxy(upstream, qwen3_dir) as fresh:  # fmt: skip
        yield stub, session, fresh


def test_a_changed_instructions_is_the_system_turn(qwen3_dir: Path) -> None:
    """Item 1 of issue 37: the second call's ``instructions`` (NINJA) opens its prompt, not
    the first call's (PIRATE), in the session as in a fresh app."""
    first = {"role": "user", "content": "hello"}
    calls = [
        {"model": MODEL, "instructions": PIRATE, "input": [first]},
        {"model": MODEL, "instructions": NINJA, "input": [
            first, {"role": "assistant", "content": "arr"}, {"role": "user", "content": "who?"}]},
    ]  # fmt: skip
    stub = StubUpstream()
    headers = {"x-session-id": "codex-1", "authorization": "Bearer k"}
    with stub.serve() as upstream, proxy(upstream, qwen3_dir) as session:
        remembered = [answer(session, "/v1/responses", orjson.dumps(c), stub, headers)
                      for c in calls]  # fmt: skip
    with stub.serve() as upstream, proxy(upstream, qwen3_dir) as fresh:
        alone = answer(fresh, "/v1/responses", orjson.dumps(calls[1]), stub, headers)
    assert remembered[1][0] == 200
    assert remembered[1] == alone


@pytest.mark.parametrize("api", ARRAY)
def test_a_duplicated_array_reads_as_orjson_reads_it(apps: Apps, api: str) -> None:
    """Item 2 of issue 37: a body with its array twice, then a continuation appending to the
    first one: both read the last array, as orjson (and a fresh app) does."""
    array = ARRAY[api]
    one = [{"role": "user", "content": "first"}]
    two = [{"role": "user", "content": "second"}]
    more = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}]
    calls = [[*BASE[api], (array, one), (array, two)],
             [*BASE[api], (array, [*one, *more]), (array, two)]]  # fmt: skip
    stub, session, fresh = apps
    headers = fresh_headers()  # a session of this test's own
    for pairs in calls:
        body = encode(pairs)
        remembered = answer(session, PATH[api], body, stub, headers)
        assert remembered[0] == 200
        assert remembered == answer(fresh, PATH[api], body, stub, fresh_headers())


@st.composite
def bodies(draw: st.DrawFn, api: str, history: list[Any], fields: dict[str, Any]) -> Pairs:
    """A body around ``history``: ``fields`` (the previous call's, as an agent resends them)
    with one maybe changed, in any order, maybe a key twice."""
    if draw(st.booleans()):
        name = draw(st.sampled_from(sorted(FIELDS[api])))
        fields = {**fields, name: draw(FIELDS[api][name])}
    if draw(st.integers(0, 7)) == 7:
        fields.update([REFUSED[api]])
    pairs = [*dict([*BASE[api], *fields.items()]).items(), (ARRAY[api], history)]
    pairs = draw(st.permutations(pairs))
    if draw(st.booleans()):
        twice = draw(st.sampled_from([*(k for k, _ in pairs), ARRAY[api]]))
        value = draw(FIELDS[api].get(twice, st.lists(ITEMS[api], max_size=2)))
        pairs.insert(draw(st.integers(0, len(pairs))), (twice, value))
    return pairs


@pytest.mark.parametrize("api", ARRAY)
def test_every_field_is_read_afresh(apps: Apps, api: str) -> None:
    statuses: Counter[int] = Counter()
    stub, session, fresh = apps

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data(), st.booleans())
    def run(data: st.DataObject, named: bool) -> None:
        n = next(keys)
        headers = {"authorization": f"Bearer session-{n}"}
        if named:
            headers["x-session-id"] = f"s-{n}"
        history: list[Any] = []
        fields = data.draw(st.fixed_dictionaries({}, optional=FIELDS[api]))
        for _ in range(data.draw(st.integers(2, 6))):
            new = data.draw(st.lists(ITEMS[api], min_size=1, max_size=2))
            history = [*history, *new] if history and data.draw(st.booleans()) else new
            if data.draw(st.booleans()):
                fields = data.draw(st.fixed_dictionaries({}, optional=FIELDS[api]))
            pairs = data.draw(bodies(api, history, fields))
            body = encode(pairs)
            remembered = answer(session, PATH[api], body, stub, headers)
            statuses[remembered[0]] += 1
            assert remembered == answer(fresh, PATH[api], body, stub, fresh_headers())
            name, value = REFUSED[api]
            if dict(pairs).get(name) == value:
                assert remembered[0] == 400, remembered

    run()
    assert statuses[200] and statuses[400], statuses  # both kinds of body were sent
