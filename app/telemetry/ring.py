"""The last N finished requests, for ``/debug/traces``: records kept as they are, turned into
the page's JSON (with the same span layout as the OpenTelemetry export) only when viewed."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from app.telemetry.layout import SpanPlan, child_spans, root_span
from app.telemetry.observer import RequestRecord


class TraceRing:
    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._records: deque[RequestRecord] = deque(maxlen=size)
        self._epoch = time.time() - time.perf_counter()

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    def requests(self, session: Callable[[str], bool] | None = None) -> list[dict[str, Any]]:
        """The kept requests, newest first, as the trace page shows them; with ``session``,
        those whose session key it accepts."""
        with self._lock:
            records = list(self._records)
        if session is not None:
            records = [r for r in records if session(r.timings.session)]
        return [self._request(record) for record in reversed(records)]

    def __len__(self) -> int:
        return len(self._records)

    def _request(self, record: RequestRecord) -> dict[str, Any]:
        root = root_span(record)
        attributes = root.attributes

        def ms(mark: float) -> float:
            return round((mark - root.start) * 1e3, 3)

        def span(plan: SpanPlan) -> dict[str, Any]:
            return {
                "name": plan.name,
                "offset_ms": ms(plan.start),
                "duration_ms": round(max(plan.end - plan.start, 0.0) * 1e3, 3),
                "attributes": plan.attributes,
                "events": [{"name": name, "offset_ms": ms(mark)} for name, mark in plan.events],
            }

        return {
            "name": root.name,
            "start_unix_ms": int((root.start + self._epoch) * 1e3),
            "duration_ms": ms(root.end),
            "api": attributes["toksplice.api"],
            "model": attributes["gen_ai.request.model"],
            "session": attributes["gen_ai.conversation.id"],
            "route": attributes["toksplice.route"],
            "outcome": attributes["toksplice.outcome"],
            "prompt_tokens": attributes["gen_ai.usage.input_tokens"],
            "reused_tokens": attributes["toksplice.reused_tokens"],
            "ttft_ms": attributes.get("toksplice.ttft_ms"),
            "proxy_added_ms": attributes.get("toksplice.proxy_added_ms"),
            "spans": [span(plan) for plan in child_spans(record)],
        }
