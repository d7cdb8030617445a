"""One context per session key, over real HTTP (client -> proxy -> a stand-in upstream): a
session named by its headers keeps everything the proxy remembers of it, its token state and
body memos included, in one registry context; a keyless caller's body memos sit in one
context of the caller.  Either way each call's ids are a fresh process's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
from fastapi import FastAPI

from app.config import Settings
from app.main import create_app
from app.service.callers import edge_caller
from app.sessions.registry import SessionRegistry
from tests.api.servers import StubUpstream, serving

MODEL = "m"
NAMED = {"authorization": "Bearer sk-context", "x-session-id": "conv-1"}
KEYLESS = {"authorization": "Bearer sk-keyless"}


@contextmanager
def proxy(upstream: str, folder: Path) -> Iterator[tuple[FastAPI, httpx.Client]]:
    settings = Settings(upstream=upstream, tokenizer=folder, model=MODEL, alignment_check=False)
    app = create_app(settings)
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        yield app, http


def turns(n: int, opening: str = "how do the parts fit together?") -> list[dict[str, str]]:
    messages = [{"role": "user", "content": opening}]
    for k in range(n):
        messages += [
            {"role": "assistant", "content": f"They fit like this, step {k}."},
            {"role": "user", "content": f"and after step {k}?"},
        ]
    return messages


def calls(n: int, opening: str = "how do the parts fit together?") -> Iterator[tuple[str, Any]]:
    """A growing conversation, through chat completions and Anthropic Messages by turns."""
    for k in range(n):
        if k % 2:
            yield "/v1/messages", {"model": MODEL, "max_tokens": 8, "messages": turns(k, opening)}
        else:
            yield "/v1/chat/completions", {"model": MODEL, "messages": turns(k, opening)}


def post(http: httpx.Client, call: tuple[str, Any], headers: dict[str, str]) -> None:
    path, body = call
    reply = http.post(path, content=orjson.dumps(body), headers=headers)
    assert reply.status_code == 200, reply.text


def slots(sessions: SessionRegistry, key: str, names: tuple[str, ...]) -> set[str]:
    return {name for name in names if sessions.value(key, name) is not None}


MEMOS = ("tokens", "recent", "render", "ids_json", "body", "anthropic_body", "anthropic")


def test_a_named_session_is_one_context_and_answers_as_a_fresh_one(smollm2_dir: Path) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as (app, http), \
            proxy(upstream, smollm2_dir) as (_, fresh):  # fmt: skip
        for n, call in enumerate(calls(6)):
            post(http, call, NAMED)
            remembered = stub.requests[-1]["prompt"]
            post(fresh, call, {**NAMED, "x-session-id": f"fresh-{n}"})
            assert remembered == stub.requests[-1]["prompt"]
        sessions: SessionRegistry = app.state.sessions
        key = edge_caller(NAMED).key
        assert key.endswith("/s:conv-1") and sessions.stats()["sessions"] == 1
        assert slots(sessions, key, MEMOS) == set(MEMOS)


def test_a_keyless_caller_keeps_its_bodies_in_one_context(smollm2_dir: Path) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as (app, http):
        for opening in ("first conversation?", "second conversation?"):
            for call in calls(4, opening):
                post(http, call, KEYLESS)
        sessions: SessionRegistry = app.state.sessions
        caller = edge_caller(KEYLESS).key
        assert caller.endswith("/-")
        assert slots(sessions, caller, MEMOS) == {"body", "anthropic_body", "anthropic"}
        assert sessions.stats()["sessions"] == 3  # the caller's, and one per conversation
        assert sessions.holding("tokens") == 2
