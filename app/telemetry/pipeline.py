"""``Telemetry``: what the chat service reports to, and the worker that makes it telemetry.

On the request path: ``observe`` (marks, a record handed over with one non-blocking put) and
``shadow.draw`` (one random draw).  In the worker thread: Prometheus metrics, the trace
page's ring and, when an exporter is configured, OpenTelemetry spans.  A record that finds the
queue full is dropped and counted, never waited for.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Mapping

from app.config import Settings
from app.telemetry.metrics import Metrics
from app.telemetry.observer import Exchange, RequestObserver, RequestRecord
from app.telemetry.refusals import Refusals
from app.telemetry.ring import TraceRing
from app.telemetry.shadow import ShadowVerifier
from app.telemetry.spans import SpanExport

log = logging.getLogger("toksplice.telemetry")

_QUEUE = 4096
_SHADOW_CLOSE_S = 5.0
"""How long a shutdown lets the shadow verifier finish its queued checks."""


class Telemetry:
    def __init__(self, settings: Settings, environ: Mapping[str, str] | None = None) -> None:
        self.metrics = Metrics()
        self.ring = TraceRing(settings.trace_ring) if settings.tracing else None
        self.export = SpanExport.configured(settings, os.environ if environ is None else environ)
        self.shadow = ShadowVerifier(settings, self.metrics)
        self.refusals = Refusals(self.metrics.registry, settings.trace_ring)
        self._records: queue.Queue[RequestRecord | None] = queue.Queue(_QUEUE)
        self._worker = threading.Thread(target=self._run, name="toksplice-telemetry", daemon=True)
        self._worker.start()

    def observe(self, exchange: Exchange) -> RequestObserver:
        """Wrap one upstream exchange: ``with telemetry.observe(exchange) as seen:``."""
        return RequestObserver(exchange, self._submit)

    def close(self) -> None:
        """Records what was observed, flushes the exporters, stops the workers."""
        self._records.put(None)
        self._worker.join(timeout=30)
        self.shadow.close(_SHADOW_CLOSE_S)
        if self.export is not None:
            self.export.shutdown()

    def drain(self) -> None:
        """Waits until every record handed over so far is in the metrics and traces."""
        self._records.join()

    def _submit(self, record: RequestRecord) -> None:
        try:
            self._records.put_nowait(record)
        except queue.Full:
            self.metrics.trace_drops.inc()

    def _run(self) -> None:
        while True:
            record = self._records.get()
            try:
                if record is None:
                    return
                self.metrics.record(record)
                if self.ring is not None:
                    self.ring.add(record)
                if self.export is not None:
                    self.export.record(record)
            except Exception:
                log.exception("telemetry of a request failed")
            finally:
                self._records.task_done()
