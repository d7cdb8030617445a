"""The spans of one request, as plain data: the one definition both the OpenTelemetry export
and the trace page read.

Times are the request's monotonic marks (seconds); attributes carry lengths, counts and a
digest of the session key, never content or keys.  GenAI semantic-convention attributes where
one exists, else ``toksplice.*``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.telemetry.observer import RequestRecord
from app.telemetry.shadow import session_digest


@dataclass(frozen=True, slots=True)
class SpanPlan:
    name: str
    start: float
    end: float
    attributes: dict[str, Any] = field(default_factory=dict)
    events: tuple[tuple[str, float], ...] = ()
    """(name, mark) of each event."""


def root_span(record: RequestRecord) -> SpanPlan:
    """The server span: the whole request, ``{gen_ai.operation.name} {gen_ai.request.model}``."""
    t = record.timings
    return SpanPlan(f"chat {record.model}", t.received, t.finished, _request_attributes(record))


def child_spans(record: RequestRecord) -> list[SpanPlan]:
    """Parse, render, tokenize, connect (a new upstream connection), upstream (sent -> first
    token) and stream back: those the request reached."""
    t = record.timings
    parsed = t.received + t.read_s + t.parse_s
    spans = [SpanPlan("parse", t.received, parsed, {"toksplice.read_ms": t.read_s * 1e3})]
    if t.prepare_started:
        rendered = t.prepare_started + t.render_s
        spans.append(SpanPlan("render", t.prepare_started, rendered))
        spans.append(
            SpanPlan("tokenize", rendered, rendered + t.tokenize_s, _tokenize_attributes(record))
        )
        if record.prompt.lookup_s:  # within tokenize: before the reference encodes
            looked_up = rendered + record.prompt.lookup_s
            spans.append(SpanPlan("session lookup/diff", rendered, looked_up))
    if t.upstream_connected:
        spans.append(SpanPlan("connect", t.upstream_connecting, t.upstream_connected))
    if t.upstream_sent:
        first_byte = (("first byte", t.upstream_first_byte),) if t.upstream_first_byte else ()
        spans.append(
            SpanPlan("upstream", t.upstream_sent, t.first_token or t.finished, events=first_byte)
        )
    if record.stream and t.first_token:
        spans.append(SpanPlan("stream back", t.first_token, t.finished))
    return spans


def _request_attributes(record: RequestRecord) -> dict[str, Any]:
    t, prompt = record.timings, record.prompt
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": record.provider,
        "gen_ai.request.model": record.model,
        "gen_ai.conversation.id": session_digest(t.session),
        "gen_ai.usage.input_tokens": prompt.prompt_tokens,
        "toksplice.api": t.api,
        "toksplice.route": prompt.route,
        "toksplice.reused_tokens": prompt.reused_tokens,
        "toksplice.stream": record.stream,
        "toksplice.outcome": record.outcome,
    }
    if record.outcome not in ("ok", "cancelled"):
        attributes["error.type"] = record.outcome
    if record.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = (record.finish_reason,)
    usage = record.usage or {}
    if isinstance(usage.get("completion_tokens"), int):
        attributes["gen_ai.usage.output_tokens"] = usage["completion_tokens"]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if isinstance(cached, int):
        attributes["gen_ai.usage.cache_read.input_tokens"] = cached
    if t.upstream_sent:
        attributes["toksplice.proxy_added_ms"] = t.proxy_added * 1e3
    if t.first_token:
        attributes["toksplice.ttft_ms"] = (t.first_token - t.received) * 1e3
    return attributes


def _tokenize_attributes(record: RequestRecord) -> dict[str, Any]:
    prompt = record.prompt
    attributes: dict[str, Any] = {
        "toksplice.route": prompt.route,
        "toksplice.prompt_tokens": prompt.prompt_tokens,
        "toksplice.reused_tokens": prompt.reused_tokens,
        "toksplice.encoded_bytes": prompt.encoded_bytes,
        "toksplice.searches": prompt.searches,
        "toksplice.retries": prompt.retries,
        "toksplice.window": prompt.window,
        "toksplice.parallel_chunks": prompt.parallel_chunks,
    }
    if prompt.fallback is not None:
        attributes["toksplice.fallback"] = prompt.fallback
    return attributes
