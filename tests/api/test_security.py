"""The proxy's own API keys over real HTTP: 401 in each client's error format, tenants never
reuse each other's sessions (also through a shared Redis), and no key reaches the logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.servers import StubUpstream
from tests.api.test_faults import HELLO, MODEL, assert_openai_error, expected_ids, proxy
from tests.services import RedisServer

KEYS = {"sk-acme-1f2e3d": "acme", "sk-globex-9c8b7a": "globex"}
UPSTREAM_KEY = "sk-upstream-secret-5d4c"


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(KEYS))
    return path


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


ANTHROPIC_HELLO = {
    "model": MODEL,
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "Say hello."}],
}
RESPONSES_HELLO = {"model": MODEL, "input": "Say hello."}


@pytest.mark.parametrize("headers", [{}, bearer("sk-wrong"), {"x-api-key": "sk-wrong"}])
def test_calls_without_an_accepted_key_get_401_in_their_clients_format(
    smollm2_dir: Path, keys_file: Path, headers: dict[str, str]
) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir, api_keys_file=keys_file) as http:
        assert_openai_error(http.post("/v1/chat/completions", json=HELLO, headers=headers), 401)
        assert_openai_error(http.post("/v1/responses", json=RESPONSES_HELLO, headers=headers), 401)
        assert_openai_error(http.get("/v1/models", headers=headers), 401)
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            reply = http.post(path, json=ANTHROPIC_HELLO, headers=headers)
            assert reply.status_code == 401
            assert reply.json()["type"] == "error"
            assert reply.json()["error"]["type"] == "authentication_error"
        assert http.get("/health").status_code == 200
        assert http.get("/health/live").status_code == 200
        assert stub.requests == []  # nothing reached the upstream
        ok = http.post("/v1/chat/completions", json=HELLO, headers=bearer("sk-globex-9c8b7a"))
        assert ok.status_code == 200
        ok = http.post(
            "/v1/messages", json=ANTHROPIC_HELLO, headers={"x-api-key": "sk-acme-1f2e3d"}
        )
        assert ok.status_code == 200
        assert stub.requests[0]["prompt"] == expected_ids(smollm2_dir, HELLO)


def conversation(turns: int) -> list[dict[str, Any]]:
    body = dict(HELLO, messages=[{"role": "system", "content": "You are terse. " * 40}])
    calls = []
    for k in range(turns):
        body = dict(body, messages=[*body["messages"], {"role": "user", "content": f"Q{k}?"}])
        calls.append(body)
        body = dict(body, messages=[*body["messages"], {"role": "assistant", "content": f"A{k}."}])
    return calls


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_tenants_never_reuse_each_others_sessions(
    smollm2_dir: Path, keys_file: Path, redis_server: RedisServer, store: str
) -> None:
    """Two tenants send the same conversation under the same session id: each tenant's own
    second call repairs; the other tenant's first call is a full encode (nothing shared, not
    even by content), also when both replicas share one Redis."""
    stub = StubUpstream()
    options = {"api_keys_file": keys_file, "store": redis_server.url if store == "redis" else store}
    calls = conversation(3)
    with (
        stub.serve() as upstream,
        proxy(upstream, smollm2_dir, **options) as a,
        proxy(upstream, smollm2_dir, **options) as b,
    ):

        def route(http: httpx.Client, key: str, body: dict[str, Any]) -> str:
            headers = bearer(key) | {"x-session-id": "shared-name"}
            reply = http.post("/v1/chat/completions", json=body, headers=headers)
            assert reply.status_code == 200, reply.text
            assert stub.requests[-1]["prompt"] == expected_ids(smollm2_dir, body)
            return reply.headers["x-toksplice-route"]

        assert route(a, "sk-acme-1f2e3d", calls[0]) == "full"
        assert route(a, "sk-acme-1f2e3d", calls[1]) == "append"
        assert route(b, "sk-globex-9c8b7a", calls[1]) == "full"
        assert route(b, "sk-globex-9c8b7a", calls[2]) == "append"
        # acme's session moves to b: repaired from acme's own state in Redis, if shared.
        assert route(b, "sk-acme-1f2e3d", calls[2]) == ("append" if store == "redis" else "full")


def test_no_keys_in_logs(
    smollm2_dir: Path, keys_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stub = StubUpstream(mode="error500")
    caplog.set_level(logging.DEBUG)
    with (
        stub.serve() as upstream,
        proxy(
            upstream, smollm2_dir, api_keys_file=keys_file, upstream_api_key=UPSTREAM_KEY
        ) as http,
    ):
        http.post("/v1/chat/completions", json=HELLO, headers=bearer("sk-wrong-key-0000"))
        failed = http.post("/v1/chat/completions", json=HELLO, headers=bearer("sk-acme-1f2e3d"))
        assert failed.status_code == 502
        assert UPSTREAM_KEY not in failed.text
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert "refused api=chat status=502 reason=upstream_status" in logged  # logged ...
    for secret in (*KEYS, "sk-wrong-key-0000", UPSTREAM_KEY):
        assert secret not in logged  # ... without any key
