"""Whatever the proxy remembers of a session's previous bodies, each body is answered as a
fresh session answers it: same status, same error, same ids upstream.  A rejected body
(``role: wizard``, ``tool_calls`` on a user message) extended by valid messages is still
rejected."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import httpx
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.servers import StubUpstream
from tests.api.test_faults import MODEL, proxy

CALL = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
messages = st.sampled_from([
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
steps = st.lists(
    st.tuples(st.booleans(), st.lists(messages, min_size=1, max_size=3)), min_size=2, max_size=7
)
fresh_keys = itertools.count()


def _answer(http: httpx.Client, body: bytes, key: str, stub: StubUpstream) -> tuple[Any, ...]:
    sent = len(stub.requests)
    reply = http.post("/v1/chat/completions", content=body, headers={
        "content-type": "application/json", "authorization": f"Bearer {key}"})  # fmt: skip
    error = reply.json().get("error") if reply.status_code != 200 else None
    prompt = stub.requests[-1]["prompt"] if len(stub.requests) > sent else None
    return reply.status_code, error, prompt


def test_a_session_answers_every_body_as_a_fresh_one(smollm2_dir: Path) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as session, \
            proxy(upstream, smollm2_dir) as fresh:  # fmt: skip
        sessions = itertools.count()

        @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(steps)
        def run(calls: list[tuple[bool, list[Any]]]) -> None:
            key = f"session-{next(sessions)}"
            history: list[Any] = []
            for extend, new in calls:
                history = [*history, *new] if extend else new
                body = orjson.dumps({"model": MODEL, "messages": history})
                remembered = _answer(session, body, key, stub)
                assert remembered == _answer(fresh, body, f"fresh-{next(fresh_keys)}", stub)

        run()
