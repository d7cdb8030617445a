"""W3C Trace Context: a client's trace joined by the proxy and carried on to the upstream.

The client's ``traceparent`` (and ``tracestate``) header is read with OpenTelemetry's own
propagator: the proxy's request span becomes a child of the client's span, and the upstream
request carries a ``traceparent`` naming the proxy's upstream span, so that one trace shows
client, proxy and engine (vLLM and SGLang read the header and export spans of their own).
Without a valid header (absent or malformed: never an error) the proxy starts the trace.

The span ids are drawn when the request arrives: the upstream request goes out long before
the telemetry worker builds the spans from the finished record (``spans.SpanExport``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR = TraceContextTextMapPropagator()
_IDS = RandomIdGenerator()


@dataclass(frozen=True, slots=True)
class RequestTrace:
    """The trace one request belongs to and the ids of the proxy's own spans in it."""

    trace_id: int
    request_span_id: int
    """The proxy's server span (the whole request)."""
    upstream_span_id: int
    """The proxy's client span of the upstream exchange: the engine's spans' parent."""
    parent: SpanContext | None = None
    """The client's span, when its ``traceparent`` was valid."""

    @classmethod
    def new(cls) -> RequestTrace:
        """A trace of the proxy's own."""
        return cls(_IDS.generate_trace_id(), _IDS.generate_span_id(), _IDS.generate_span_id())

    @classmethod
    def of(cls, headers: Mapping[str, str]) -> RequestTrace:
        """The client's trace, from its request headers; a new one without a valid one."""
        if "traceparent" not in headers:  # most clients send none: skip the propagator
            return cls.new()
        parent = trace.get_current_span(_PROPAGATOR.extract(headers)).get_span_context()
        if not parent.is_valid:
            return cls.new()
        return cls(parent.trace_id, _IDS.generate_span_id(), _IDS.generate_span_id(), parent)

    def parent_context(self) -> Context:
        """The context the proxy's request span starts in: the client's span, or none."""
        if self.parent is None:
            return Context()
        return trace.set_span_in_context(NonRecordingSpan(self.parent), Context())

    def upstream_headers(self) -> dict[str, str]:
        """``traceparent`` (and the client's ``tracestate``) for the upstream request; the
        client's sampling decision is kept, a trace of the proxy's own is sampled."""
        parent = self.parent
        flags = parent.trace_flags if parent is not None else TraceFlags(TraceFlags.SAMPLED)
        span = SpanContext(
            self.trace_id,
            self.upstream_span_id,
            is_remote=False,
            trace_flags=flags,
            trace_state=parent.trace_state if parent is not None else None,
        )
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, trace.set_span_in_context(NonRecordingSpan(span)))
        return carrier
