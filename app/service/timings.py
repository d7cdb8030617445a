"""Where one request's time goes, as the proxy measures it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Timings:
    """Monotonic marks of one request (seconds); ``proxy_added`` is request in -> upstream
    request out."""

    received: float
    upstream_sent: float = 0.0
    read_s: float = 0.0
    parse_s: float = 0.0
    render_s: float = 0.0
    tokenize_s: float = 0.0

    @property
    def proxy_added(self) -> float:
        return self.upstream_sent - self.received

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
