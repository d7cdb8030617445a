"""The in-memory span exporter behind ``/debug/traces``: the last N requests' traces.

Spans of one trace arrive children first (the telemetry worker ends them before the root), so
children wait in ``_pending`` until their root ends; a trace is kept whole or not at all.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_MAX_PENDING = 4096


class TraceRing(SpanExporter):
    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._traces: deque[tuple[ReadableSpan, list[ReadableSpan]]] = deque(maxlen=size)
        self._pending: dict[int, list[ReadableSpan]] = {}

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            for span in spans:
                trace_id = span.context.trace_id if span.context else 0
                if span.parent is None:
                    self._traces.append((span, self._pending.pop(trace_id, [])))
                elif len(self._pending) < _MAX_PENDING or trace_id in self._pending:
                    self._pending.setdefault(trace_id, []).append(span)
        return SpanExportResult.SUCCESS

    def requests(self) -> list[dict[str, Any]]:
        """The kept requests, newest first, as the trace page shows them."""
        with self._lock:
            traces = list(self._traces)
        return [_request(root, children) for root, children in reversed(traces)]


def _request(root: ReadableSpan, children: list[ReadableSpan]) -> dict[str, Any]:
    start = root.start_time or 0
    attributes = dict(root.attributes or {})

    def ms(ns: int | None) -> float:
        return round(((ns or start) - start) / 1e6, 3)

    return {
        "trace_id": f"{root.context.trace_id:032x}" if root.context else "",
        "name": root.name,
        "start_unix_ms": start // 1_000_000,
        "duration_ms": ms(root.end_time),
        "api": attributes.get("toksplice.api"),
        "model": attributes.get("gen_ai.request.model"),
        "session": attributes.get("gen_ai.conversation.id"),
        "route": attributes.get("toksplice.route"),
        "outcome": attributes.get("toksplice.outcome"),
        "prompt_tokens": attributes.get("gen_ai.usage.input_tokens"),
        "reused_tokens": attributes.get("toksplice.reused_tokens"),
        "ttft_ms": attributes.get("toksplice.ttft_ms"),
        "proxy_added_ms": attributes.get("toksplice.proxy_added_ms"),
        "spans": [
            {
                "name": span.name,
                "offset_ms": ms(span.start_time),
                "duration_ms": round(ms(span.end_time) - ms(span.start_time), 3),
                "attributes": dict(span.attributes or {}),
                "events": [
                    {"name": event.name, "offset_ms": ms(event.timestamp)}
                    for event in span.events
                ],
            }
            for span in sorted(children, key=lambda s: s.start_time or 0)
        ],
    }
