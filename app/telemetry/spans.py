"""OpenTelemetry export of each request's spans (``layout``), when an exporter is asked for.

Spans get explicit start and end times: ``perf_counter`` marks become epoch nanoseconds with
one offset taken at startup.  Exporters: OTLP (http/protobuf) when
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, the
console with ``trace_console``; with neither, no spans are built at all (the trace page reads
its own ring).  The provider is the app's own; the process-global one is left alone.

The request span and the upstream span take the ids the request drew when it arrived
(``trace_context``): the first is the client's span's child, the second the parent the
upstream's request named.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from app.config import Settings
from app.telemetry.layout import child_spans, root_span
from app.telemetry.observer import RequestRecord
from app.telemetry.trace_context import RequestTrace

OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class _DrawnIds(RandomIdGenerator):
    """Random ids, but the next span (and a new trace) takes the ids ``take`` was given:
    those the request drew on arrival.  Only the telemetry worker thread starts spans."""

    def __init__(self) -> None:
        self._span_id = self._trace_id = 0

    def take(self, span_id: int, trace_id: int = 0) -> None:
        self._span_id, self._trace_id = span_id, trace_id

    def generate_span_id(self) -> int:
        drawn, self._span_id = self._span_id, 0
        return drawn or super().generate_span_id()

    def generate_trace_id(self) -> int:
        drawn, self._trace_id = self._trace_id, 0
        return drawn or super().generate_trace_id()


class SpanExport:
    def __init__(self, provider: TracerProvider, ids: _DrawnIds) -> None:
        self._provider = provider
        self._ids = ids
        self._tracer = provider.get_tracer("toksplice")
        self._offset_ns = time.time_ns() - time.perf_counter_ns()

    @classmethod
    def configured(cls, settings: Settings, environ: Mapping[str, str]) -> SpanExport | None:
        """The exporters the settings and environment ask for; None when none is."""
        otlp = any(environ.get(name) for name in OTLP_VARIABLES)
        if not settings.tracing or not (otlp or settings.trace_console):
            return None
        ids = _DrawnIds()
        resource = Resource.create({"service.name": "toksplice"})
        provider = TracerProvider(resource=resource, id_generator=ids)
        if otlp:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        if settings.trace_console:
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stdout)))
        return cls(provider, ids)

    def shutdown(self) -> None:
        """Flushes the exporters."""
        self._provider.shutdown()

    def record(self, record: RequestRecord) -> None:
        plan = root_span(record)
        drawn = record.timings.trace or RequestTrace.new()
        self._ids.take(drawn.request_span_id, drawn.trace_id)
        root = self._tracer.start_span(
            plan.name,
            drawn.parent_context(),
            kind=SpanKind.SERVER,
            attributes=plan.attributes,
            start_time=self._ns(plan.start),
        )
        if "error.type" in plan.attributes:
            root.set_status(Status(StatusCode.ERROR))
        parent = trace.set_span_in_context(root)
        for child in child_spans(record):
            kind = SpanKind.INTERNAL
            if child.name == "upstream":
                kind = SpanKind.CLIENT
                self._ids.take(drawn.upstream_span_id)
            span = self._tracer.start_span(
                child.name, parent, kind, child.attributes, start_time=self._ns(child.start)
            )
            for name, mark in child.events:
                span.add_event(name, timestamp=self._ns(mark))
            span.end(end_time=self._ns(max(child.end, child.start)))
        root.end(end_time=self._ns(plan.end))

    def _ns(self, mark: float) -> int:
        return int(mark * 1e9) + self._offset_ns
