"""One OpenTelemetry trace per request, built after the fact from its monotonic marks.

Spans get explicit start and end times: ``perf_counter`` marks are turned into epoch
nanoseconds with one offset taken at startup.  Exporters: the in-memory ring behind
``/debug/traces`` always, OTLP (http/protobuf) when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, the console with ``trace_console``.  The
provider is the app's own; the process-global one is left alone.

Spans carry lengths, counts and a digest of the session key, never content or keys.
Attributes follow the GenAI semantic conventions where one exists, else ``toksplice.*``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
)
from opentelemetry.trace import SpanKind, Status, StatusCode

from app.config import Settings
from app.telemetry.observer import RequestRecord
from app.telemetry.ring import TraceRing
from app.telemetry.shadow import session_digest

OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class Tracing:
    def __init__(self, settings: Settings, environ: Mapping[str, str]) -> None:
        self.ring = TraceRing(settings.trace_ring)
        self._provider = TracerProvider(resource=Resource.create({"service.name": "toksplice"}))
        self._provider.add_span_processor(SimpleSpanProcessor(self.ring))
        if any(environ.get(name) for name in OTLP_VARIABLES):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            self._provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        if settings.trace_console:
            self._provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stdout)))
        self._tracer = self._provider.get_tracer("toksplice")
        self._offset_ns = time.time_ns() - time.perf_counter_ns()

    def shutdown(self) -> None:
        """Flushes the exporters."""
        self._provider.shutdown()

    def record(self, record: RequestRecord) -> None:
        t = record.timings
        end = t.finished
        root = self._tracer.start_span(
            f"chat {record.model}",
            kind=SpanKind.SERVER,
            start_time=self._ns(t.received),
            attributes=_request_attributes(record),
        )
        if record.outcome not in ("ok", "cancelled"):
            root.set_status(Status(StatusCode.ERROR))
            root.set_attribute("error.type", record.outcome)
        parent = trace.set_span_in_context(root)
        parsed = t.received + t.read_s + t.parse_s
        rendered = t.prepare_started + t.render_s
        children: list[tuple[str, float, float, dict[str, Any]]] = [
            ("read body", t.received, t.received + t.read_s, {}),
            ("parse", t.received + t.read_s, parsed, {}),
        ]
        if t.prepare_started:
            children += [
                ("render", t.prepare_started, rendered, {}),
                ("tokenize", rendered, rendered + t.tokenize_s, _tokenize_attributes(record)),
            ]
        if t.upstream_sent:
            upstream_end = t.first_token or end
            children.append(("upstream", t.upstream_sent, upstream_end, {}))
        if record.stream and t.first_token:
            children.append(("stream back", t.first_token, end, {}))
        for name, start, stop, attributes in children:
            kind = SpanKind.CLIENT if name == "upstream" else SpanKind.INTERNAL
            span = self._tracer.start_span(
                name, parent, kind, attributes, start_time=self._ns(start)
            )
            if name == "upstream" and t.upstream_first_byte:
                span.add_event("first byte", timestamp=self._ns(t.upstream_first_byte))
            span.end(end_time=self._ns(max(stop, start)))
        root.end(end_time=self._ns(end))

    def _ns(self, mark: float) -> int:
        return int(mark * 1e9) + self._offset_ns


def _request_attributes(record: RequestRecord) -> dict[str, Any]:
    t, enc = record.timings, record.encoding
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": record.provider,
        "gen_ai.request.model": record.model,
        "gen_ai.conversation.id": session_digest(t.session),
        "gen_ai.usage.input_tokens": len(enc.ids),
        "toksplice.api": t.api,
        "toksplice.route": enc.route,
        "toksplice.reused_tokens": enc.reused_tokens,
        "toksplice.stream": record.stream,
        "toksplice.outcome": record.outcome,
    }
    if record.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = (record.finish_reason,)
    usage = record.usage or {}
    if isinstance(usage.get("completion_tokens"), int):
        attributes["gen_ai.usage.output_tokens"] = usage["completion_tokens"]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if isinstance(cached, int):
        attributes["gen_ai.usage.cache_read.input_tokens"] = cached
    if t.upstream_sent:
        attributes["toksplice.proxy_added_ms"] = t.proxy_added * 1e3
    if t.first_token:
        attributes["toksplice.ttft_ms"] = (t.first_token - t.received) * 1e3
    return attributes


def _tokenize_attributes(record: RequestRecord) -> dict[str, Any]:
    enc = record.encoding
    attributes: dict[str, Any] = {
        "toksplice.route": enc.route,
        "toksplice.prompt_tokens": len(enc.ids),
        "toksplice.reused_tokens": enc.reused_tokens,
        "toksplice.encoded_bytes": enc.encoded_bytes,
        "toksplice.searches": enc.searches,
        "toksplice.retries": enc.retries,
    }
    if enc.fallback is not None:
        attributes["toksplice.fallback"] = enc.fallback
    return attributes
