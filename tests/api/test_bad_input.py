"""Bad input gets a precise 400 and at most one log line: JSON nested past what the
serializers take, invalid UTF-8, a bad Responses ``max_output_tokens``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.api.servers import StubUpstream
from tests.api.test_faults import MODEL, assert_openai_error, proxy

JSON = {"content-type": "application/json"}


def _nested(depth: int, first: bool) -> bytes:
    """A message with a part nested ``depth`` deep: the conversation's first (its session
    key is serialized) or a later one (walked by masking and rendering)."""
    deep = b"[" * depth + b"]" * depth
    message = b'{"role":"user","content":[{"type":"text","text":"x","x":%s}]}' % deep
    before = b"" if first else b'{"role":"user","content":"hi"},'
    return b'{"model":"m","messages":[%s%s]}' % (before, message)


def test_deep_nesting_is_400_with_one_log_line(
    smollm2_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server_log = logging.getLogger("uvicorn.error")  # where uvicorn writes tracebacks
    server_log.addHandler(caplog.handler)
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http:
        for depth, first in [(1000, False), (1019, False), (300, True), (1000, True)]:
            caplog.clear()
            with caplog.at_level(logging.INFO):
                body = _nested(depth, first)
                reply = http.post("/v1/chat/completions", content=body, headers=JSON)
            assert "nested too deeply" in assert_openai_error(reply, 400)["message"]
            logged = "\n".join(r.getMessage() for r in caplog.records if r.name != "httpx")
            assert not any(r.exc_info for r in caplog.records)
            assert len(logged) < 500 and logged.count("\n") <= 1, logged[:300]
    server_log.removeHandler(caplog.handler)
    assert stub.requests == []


def test_invalid_utf8_is_reported_as_such(smollm2_dir: Path) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http:
        body = b'{"model":"m","messages":[{"role":"user","content":"caf\xe9"}]}'
        reply = http.post("/v1/chat/completions", content=body, headers=JSON)
        message = assert_openai_error(reply, 400)["message"]
        assert "not valid UTF-8" in message and "surrogates" not in message


@pytest.mark.parametrize("value", [0, -1, "8", 1.5, True])
def test_a_bad_max_output_tokens_is_named(smollm2_dir: Path, value: object) -> None:
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir) as http:
        reply = http.post("/v1/responses", json={"model": MODEL, "input": "hi",
                                                 "max_output_tokens": value})  # fmt: skip
        error = assert_openai_error(reply, 400)
        assert error["param"] == "max_output_tokens" and "max_output_tokens" in error["message"]
