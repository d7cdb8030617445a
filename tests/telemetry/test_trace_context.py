"""W3C trace context over real HTTP: client -> proxy (uvicorn) -> a stand-in upstream that
records the headers it received, spans exported to an OTLP receiver.

The client's ``traceparent`` makes the proxy's request span its child, and the upstream
request names the proxy's upstream span as its parent, in the client's trace (its
``tracestate`` carried along); without one, or with a malformed one, the proxy starts a
trace of its own and still carries it upstream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.telemetry.test_http import MODEL, otlp_receiver, proxy

TRACE_PREFIX = "4bf92f3577b34da6a3ce929d0e0e47"
CLIENT_SPAN = "00f067aa0ba902b7"
ROUTES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}]},
    "/v1/messages": {"max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"input": "hi"},
}


def exported(posts: list[tuple[str, bytes]]) -> list[Span]:
    requests = [ExportTraceServiceRequest.FromString(raw) for _, raw in posts]
    return [s for r in requests for rs in r.resource_spans for ss in rs.scope_spans
            for s in ss.spans]  # fmt: skip


def traceparent(headers: dict[str, str]) -> tuple[str, str, str]:
    version, trace_id, parent_id, flags = headers["traceparent"].split("-")
    assert version == "00"
    return trace_id, parent_id, flags


def test_the_client_trace_is_joined_and_carried_upstream(
    smollm2_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = [  # (route, stream, the client's trace headers)
        *((route, stream, {"traceparent": f"00-{TRACE_PREFIX}{k:02x}-{CLIENT_SPAN}-01",
                           "tracestate": "vendor=opaque"})
          for k, (route, stream) in enumerate((r, s) for r in ROUTES for s in (False, True))),
        ("/v1/chat/completions", True, {}),
        ("/v1/chat/completions", False, {"traceparent": "00-not-a-trace-01"}),
        ("/v1/messages", True, {"traceparent": f"00-{'0' * 32}-{CLIENT_SPAN}-01"}),
    ]  # fmt: skip
    with otlp_receiver() as (endpoint, posts):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        with proxy(smollm2_dir) as (app, client, stub):
            for route, stream, headers in sent:
                body = {"model": MODEL, "stream": stream, **ROUTES[route]}
                reply = client.post(route, json=body, headers=headers)
                assert reply.status_code == 200, reply.text
                failed = (b"event: error", b"response.failed", b'data: {"error"')
                assert not any(mark in reply.content for mark in failed), reply.text
            app.state.telemetry.drain()
        # the app has stopped: its exporters flushed
    spans = exported(posts)
    upstream = stub.headers
    assert len(upstream) == len(sent)
    own_traces: set[str] = set()
    for (_, _, headers), received in zip(sent, upstream, strict=True):
        trace_id, parent_id, flags = traceparent(received)
        assert flags == "01"
        mine = [s for s in spans if s.trace_id.hex() == trace_id]
        [root] = [s for s in mine if s.kind == Span.SPAN_KIND_SERVER]
        [call] = [s for s in mine if s.name == "upstream"]
        assert call.span_id.hex() == parent_id  # the engine's spans are the upstream span's
        assert call.parent_span_id == root.span_id
        assert {s.parent_span_id for s in mine if s is not root} == {root.span_id}
        if "tracestate" in headers:  # the client's trace, joined
            assert headers["traceparent"].split("-")[1] == trace_id
            assert root.parent_span_id.hex() == CLIENT_SPAN
            assert received["tracestate"] == "vendor=opaque"
        else:  # none, or not a valid one: the proxy's own trace
            assert not trace_id.startswith(TRACE_PREFIX) and trace_id != "0" * 32
            assert not root.parent_span_id
            assert "tracestate" not in received
            own_traces.add(trace_id)
    assert len(own_traces) == 3
    assert len(spans) == sum(1 for s in spans if s.trace_id.hex() in {
        traceparent(h)[0] for h in upstream})  # fmt: skip
