"""Whatever the proxy remembers of a session's previous bodies, each body is answered as a
fresh session answers it: same status, same error, same ids upstream.  A rejected body
(``role: wizard``, ``tool_calls`` on a user message) extended by valid messages is still
rejected.  The same for the Anthropic Messages and OpenAI Responses APIs, whose translators
keep the previous call's translation (``anthropic_request``, ``responses_request``)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.servers import StubUpstream
from tests.api.test_faults import MODEL, proxy

CALL = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
chat_messages = st.sampled_from([
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi there"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c", "content": "ok"},
    {"role": "wizard", "content": "let me in"},
    {"role": "user", "content": "x", "tool_calls": [CALL]},
    {"role": "user", "content": 5},
    {"role": "assistant", "content": "", "tool_calls": [{"function": {}}]},
    "not an object",
])  # fmt: skip
USE = {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}
anthropic_messages = st.sampled_from([
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi there"},
    {"role": "user", "content": [{"type": "text", "text": "look"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "calling"}, USE]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}]},
    {"role": "wizard", "content": "let me in"},
    {"role": "user", "content": 5},
    {"role": "user", "content": [{"type": "text"}]},
    {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "x"}}]},
    {"role": "assistant", "content": [{**USE, "name": 5}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": 7, "content": "ok"}]},
    "not an object",
])  # fmt: skip
responses_items = st.sampled_from([
    {"role": "user", "content": "hello"},
    {"type": "message", "role": "assistant",
     "content": [{"type": "output_text", "text": "hi there"}]},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hm"}]},
    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c", "output": "ok"},
    {"role": "developer", "content": [{"type": "input_text", "text": "be brief"}]},
    {"role": "wizard", "content": "let me in"},
    {"role": "user", "content": 5},
    {"role": "user", "content": [{"type": "input_text", "text": 5}]},
    {"type": "function_call", "call_id": 3, "name": "f", "arguments": "{}"},
    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{not json"},
    {"type": "item_reference", "id": "r"},
    {"type": "bogus"},
    "not an object",
])  # fmt: skip
fresh_keys = itertools.count()
sessions = itertools.count()


def _chat(history: list[Any]) -> tuple[str, dict[str, Any]]:
    return "/v1/chat/completions", {"model": MODEL, "messages": history}


def _anthropic(history: list[Any]) -> tuple[str, dict[str, Any]]:
    return "/v1/messages", {"model": MODEL, "max_tokens": 8, "system": "s", "messages": history}


def _responses(history: list[Any]) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"model": MODEL, "instructions": "s", "input": history}


APIS = {
    "chat": (_chat, chat_messages),
    "anthropic": (_anthropic, anthropic_messages),
    "responses": (_responses, responses_items),
}


def _answer(
    http: httpx.Client, call: tuple[str, dict[str, Any]], key: str, stub: StubUpstream
) -> tuple[Any, ...]:
    path, body = call
    sent = len(stub.requests)
    reply = http.post(path, content=orjson.dumps(body), headers={
        "content-type": "application/json", "authorization": f"Bearer {key}"})  # fmt: skip
    error = reply.json() if reply.status_code != 200 else None
    prompt = stub.requests[-1]["prompt"] if len(stub.requests) > sent else None
    return reply.status_code, error, prompt


@pytest.mark.parametrize("api", APIS)
def test_a_session_answers_every_body_as_a_fresh_one(smollm2_dir: Path, api: str) -> None:
    request: Callable[[list[Any]], tuple[str, dict[str, Any]]]
    request, items = APIS[api]
    steps = st.lists(
        st.tuples(st.booleans(), st.lists(items, min_size=1, max_size=3)), min_size=2, max_size=7
    )
    stub = StubUpstream()
    statuses: Counter[int] = Counter()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as session, \
            proxy(upstream, smollm2_dir) as fresh:  # fmt: skip

        @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(steps)
        def run(calls: list[tuple[bool, list[Any]]]) -> None:
            key = f"session-{next(sessions)}"
            history: list[Any] = []
            for extend, new in calls:
                history = [*history, *new] if extend else new
                remembered = _answer(session, request(history), key, stub)
                statuses[remembered[0]] += 1
                assert remembered == _answer(
                    fresh, request(history), f"fresh-{next(fresh_keys)}", stub
                )

        run()
    assert statuses[200] and statuses[400], statuses  # both kinds of body were sent
