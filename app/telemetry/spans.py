"""OpenTelemetry export of each request's spans (``layout``), when an exporter is asked for.

Spans get explicit start and end times: ``perf_counter`` marks become epoch nanoseconds with
one offset taken at startup.  Exporters: OTLP (http/protobuf) when
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, the
console with ``trace_console``; with neither, no spans are built at all (the trace page reads
its own ring).  The provider is the app's own; the process-global one is left alone.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from app.config import Settings
from app.telemetry.layout import child_spans, root_span
from app.telemetry.observer import RequestRecord

OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class SpanExport:
    def __init__(self, provider: TracerProvider) -> None:
        self._provider = provider
        self._tracer = provider.get_tracer("toksplice")
        self._offset_ns = time.time_ns() - time.perf_counter_ns()

    @classmethod
    def configured(cls, settings: Settings, environ: Mapping[str, str]) -> SpanExport | None:
        """The exporters the settings and environment ask for; None when none is."""
        otlp = any(environ.get(name) for name in OTLP_VARIABLES)
        if not settings.tracing or not (otlp or settings.trace_console):
            return None
        provider = TracerProvider(resource=Resource.create({"service.name": "toksplice"}))
        if otlp:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        if settings.trace_console:
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stdout)))
        return cls(provider)

    def shutdown(self) -> None:
        """Flushes the exporters."""
        self._provider.shutdown()

    def record(self, record: RequestRecord) -> None:
        plan = root_span(record)
        root = self._tracer.start_span(
            plan.name,
            kind=SpanKind.SERVER,
            attributes=plan.attributes,
            start_time=self._ns(plan.start),
        )
        if "error.type" in plan.attributes:
            root.set_status(Status(StatusCode.ERROR))
        parent = trace.set_span_in_context(root)
        for child in child_spans(record):
            kind = SpanKind.CLIENT if child.name == "upstream" else SpanKind.INTERNAL
            span = self._tracer.start_span(
                child.name, parent, kind, child.attributes, start_time=self._ns(child.start)
            )
            for name, mark in child.events:
                span.add_event(name, timestamp=self._ns(mark))
            span.end(end_time=self._ns(max(child.end, child.start)))
        root.end(end_time=self._ns(plan.end))

    def _ns(self, mark: float) -> int:
        return int(mark * 1e9) + self._offset_ns
