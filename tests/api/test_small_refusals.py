"""Issue 37's smaller items: booleans are no numbers on chat completions (as on the other two
APIs), the trace page finds a session by the id its client sent, a browser's favicon request
is no refused chat call, and a tokenizer.json that cannot serve stops start-up with the file
and the problem named."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.errors import BadRequestError, TokenizerSpecError
from app.protocol.openai_chat import parse_chat_request
from app.sessions import SessionTokenizer
from tests.api.servers import StubUpstream
from tests.api.test_faults import assert_openai_error
from tests.telemetry.test_http import MODEL, proxy

HELLO = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture(scope="module")
def served(smollm2_dir: Path) -> Iterator[tuple[FastAPI, httpx.Client, StubUpstream]]:
    with proxy(smollm2_dir) as running:
        yield running


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens", "seed"])
def test_a_boolean_is_no_integer(field: str) -> None:
    with pytest.raises(BadRequestError):
        parse_chat_request(HELLO | {field: True})
    parse_chat_request(HELLO | {field: 3})


def test_a_boolean_is_a_400_in_openais_format(
    served: tuple[FastAPI, httpx.Client, StubUpstream],
) -> None:
    _, client, stub = served
    sent = len(stub.requests)
    for field in ("max_tokens", "seed"):
        reply = client.post("/v1/chat/completions", json=HELLO | {field: True})
        assert field in assert_openai_error(reply, 400)["message"]
    assert len(stub.requests) == sent


def test_the_trace_page_finds_the_session_id_the_client_sent(
    served: tuple[FastAPI, httpx.Client, StubUpstream],
) -> None:
    app, client, _ = served
    mine = {"x-session-id": "my-session", "authorization": "Bearer k"}
    assert client.post("/v1/chat/completions", json=HELLO, headers=mine).status_code == 200
    assert client.post("/v1/chat/completions", json=HELLO).status_code == 200
    app.state.telemetry.drain()

    def shown(session: str) -> list[str]:
        data = client.get("/debug/traces.json", params={"session": session}).json()
        return [r["session"] for r in data["requests"]]

    everything = shown("")
    digest, other = everything[1], everything[0]  # my-session's is the older one
    assert shown("my-session") == [digest]
    assert shown(digest) == [digest]
    assert shown("someone-else") == []
    data = client.get("/debug/traces.json", params={"session": "my-session"}).json()
    assert data["total"] == len(everything)  # the page's "1 of N"
    page = client.get("/debug/traces", params={"session": "my-session"}).text
    assert digest in page and other not in page


def test_a_favicon_request_is_no_refused_call(
    served: tuple[FastAPI, httpx.Client, StubUpstream],
) -> None:
    _, client, _ = served
    favicon = client.get("/favicon.ico")
    assert favicon.status_code == 204 and favicon.content == b""
    refused = client.get("/debug/traces.json").json()["refused"]
    assert all(r["path"] != "/favicon.ico" for r in refused)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ({"vocab": {}, "merges": []}, "vocabulary is empty"),
        ({"vocab": []}, "cannot load it: invalid type"),
    ],
)
def test_a_broken_tokenizer_is_named_with_its_problem(
    assets: dict[str, Path], tmp_path: Path, damage: dict[str, object], problem: str
) -> None:
    document = json.loads(assets["smollm2"].read_text(encoding="utf-8"))
    document["model"].update(damage)
    broken = tmp_path / "tokenizer.json"
    broken.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(TokenizerSpecError) as raised:
        SessionTokenizer.from_file(broken)
    assert str(raised.value).startswith(f"{broken}: ") and problem in str(raised.value)
