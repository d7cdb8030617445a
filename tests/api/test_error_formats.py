"""Errors raised before a route ran (an unknown path, a missing or wrong key, a body over the
limit) are worded in the format of the client API whose paths the request is under, over real
HTTP; the table that picks it is the routes' own declaration (``ClientApi.paths``)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute

from app.api import chat, messages, openai_responses
from app.api.errors import OTHER_PATHS, ErrorFormats
from app.protocol.error_bodies import ApiName
from tests.api.servers import StubUpstream
from tests.api.test_faults import assert_openai_error, proxy

MODULES = (chat, messages, openai_responses)
APIS = tuple(module.API for module in MODULES)
PATHS: list[tuple[str, ApiName]] = [(path, api.name) for api in APIS for path in api.paths]
KEY = "sk-acme-1f2e3d"
LIMIT = 1024


def test_the_error_table_is_the_route_table() -> None:
    formats = ErrorFormats(APIS)
    for module in MODULES:
        routes = [(r.path, r.methods) for r in module.router.routes if isinstance(r, APIRoute)]
        assert routes == [(path, {"POST"}) for path in module.API.paths]
        assert len(routes) == len(module.router.routes)
        for path in module.API.paths:
            assert formats.under(path) == formats.under(path + "/x/y") == module.API.name
            assert formats.under(path + "/") == module.API.name
    assert PATHS == [
        ("/v1/chat/completions", "chat"),
        ("/v1/messages", "messages"),
        ("/v1/messages/count_tokens", "messages"),
        ("/v1/responses", "responses"),
    ]
    for other in ("/v1/models", "/v1/messagesx", "/v1", "/", "", "/health"):
        assert formats.under(other) == OTHER_PATHS == "chat"


def assert_api_error(
    reply: httpx.Response, api: ApiName, status: int, kind: str | None = None
) -> None:
    """``reply`` is ``api``'s error answer: Anthropic's JSON for Messages (of type ``kind``
    when given), OpenAI's else."""
    if api != "messages":
        assert_openai_error(reply, status)
        return
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert set(body) == {"type", "error"} and body["type"] == "error", body
    assert set(body["error"]) == {"type", "message"}, body
    assert kind is None or body["error"]["type"] == kind, body
    assert body["error"]["message"]


@pytest.mark.parametrize(("path", "api"), PATHS)
def test_errors_before_the_route_are_in_the_apis_format(
    smollm2_dir: Path, tmp_path: Path, path: str, api: ApiName
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({KEY: "acme"}))
    key = {"x-api-key": KEY} if api == "messages" else {"authorization": f"Bearer {KEY}"}
    big = b'{"model": "m", "pad": "' + b"x" * (4 * LIMIT) + b'"}'
    stub = StubUpstream()
    options = {"api_keys_file": keys, "max_body_bytes": LIMIT}
    with stub.serve() as upstream, proxy(upstream, smollm2_dir, **options) as http:
        unknown = http.post(path + "/nope", json={}, headers=key)
        assert_api_error(unknown, api, 404, "not_found_error")
        no_method = http.get(path, headers=key)
        assert_api_error(no_method, api, 405, "invalid_request_error")
        for headers in ({}, {"authorization": "Bearer sk-wrong"}, {"x-api-key": "sk-wrong"}):
            refused = http.post(path, json={}, headers=headers)
            assert_api_error(refused, api, 401, "authentication_error")
        headers = {**key, "content-type": "application/json"}
        too_large = http.post(path, content=big, headers=headers)
        assert_api_error(too_large, api, 413, "request_too_large")
        refusals = http.get("/debug/traces.json").json()["refused"]
    assert stub.requests == []
    # Newest first; the record names the API (chat and responses share OpenAI's shape).
    assert [(r["api"], r["status"]) for r in refusals] == [
        (api, 413), (api, 401), (api, 401), (api, 401), (api, 405), (api, 404)
    ]  # fmt: skip
