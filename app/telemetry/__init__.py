"""Beside the request path, never on it: spans, metrics, the trace page's data and the
shadow verifier."""

from app.telemetry.pipeline import Telemetry

__all__ = ["Telemetry"]
