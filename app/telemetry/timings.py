"""Where one request's time goes, as the proxy measures it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.telemetry.trace_context import RequestTrace


@dataclass(slots=True)
class Timings:
    """Monotonic marks of one request (seconds); ``proxy_added`` is request in -> upstream
    request out.  Marks left at 0.0 were not reached (telemetry reads them when the request
    finishes, see ``app.telemetry``)."""

    received: float
    upstream_sent: float = 0.0
    read_s: float = 0.0
    parse_s: float = 0.0
    render_s: float = 0.0
    tokenize_s: float = 0.0
    prepare_started: float = 0.0
    """Rendering began (after the worker-thread hop, when there is one)."""
    upstream_connecting: float = 0.0
    upstream_connected: float = 0.0
    """A new upstream connection was opened (TCP, and TLS when used) between these marks."""
    upstream_first_byte: float = 0.0
    """The upstream's response headers arrived (a whole response, without streaming)."""
    first_token: float = 0.0
    """The first answer chunk with content, tool calls or a finish reason."""
    finished: float = 0.0
    api: str = "chat"
    """The client API: "chat", "messages" or "responses"."""
    session: str = ""
    """The session key (``tenant/conversation``); telemetry shows only a digest of it."""
    trace: RequestTrace | None = None
    """The W3C trace the request joined (set at the HTTP edge); the upstream request
    carries it on."""

    @property
    def proxy_added(self) -> float:
        """Until the upstream request went out; for a call that sends none (``count_tokens``),
        until now: its whole answer is the proxy's."""
        return (self.upstream_sent or time.perf_counter()) - self.received

    def server_timing(self) -> str:
        """The ``Server-Timing`` header: where the proxy's own milliseconds went."""
        parts = {
            "read": self.read_s,
            "parse": self.parse_s,
            "render": self.render_s,
            "tokenize": self.tokenize_s,
            "proxy": self.proxy_added,
        }
        return ", ".join(f"{name};dur={value * 1e3:.3f}" for name, value in parts.items())
