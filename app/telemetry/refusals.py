"""Every error the proxy answers, seen: one log line, a counter, a row on the trace page.

A refusal is recorded where it is answered (the HTTP boundary, or a stream's error event), so
requests that never reach the upstream, rejected while parsing or validating, are as visible
as upstream failures.  Nothing of the request's content is kept: the API, the status, the
reason, the path and the offending field's name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

log = logging.getLogger("toksplice")


@dataclass(frozen=True, slots=True)
class RefusalRecord:
    api: str
    status: int
    reason: str
    path: str
    param: str | None
    streaming: bool = False
    """Answered as a stream's error event (the status was sent already)."""
    detail: str | None = None
    """The error's message, for failures of ours or the upstream's (5xx) only: a client's
    own refusal message may quote what it sent."""


class Refusals:
    """Counts refusals by API, status and reason, and keeps the last ``size`` for the page."""

    def __init__(self, registry: CollectorRegistry, size: int) -> None:
        self.counter = Counter(
            "toksplice_refusals", "Error answers by client API, status and reason",
            ["api", "status", "reason"], registry=registry,
        )
        self._lock = threading.Lock()
        self._recent: deque[tuple[float, RefusalRecord]] = deque(maxlen=max(size, 1))

    def record(self, refusal: RefusalRecord) -> None:
        self.counter.labels(refusal.api, str(refusal.status), refusal.reason).inc()
        level = logging.WARNING if refusal.status >= 500 else logging.INFO
        log.log(
            level,
            "refused api=%s status=%d reason=%s path=%s param=%s streaming=%s%s",
            refusal.api, refusal.status, refusal.reason, refusal.path, refusal.param,
            refusal.streaming, "" if refusal.detail is None else f" detail={refusal.detail!r}",
        )
        with self._lock:
            self._recent.append((time.time(), refusal))

    def recent(self) -> list[dict[str, Any]]:
        """Newest first, as the trace page shows them."""
        with self._lock:
            kept = list(self._recent)
        return [{"unix_ms": int(at * 1e3), **asdict(r)} for at, r in reversed(kept)]
