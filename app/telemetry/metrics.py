"""Prometheus metrics, in a registry of the app's own (no process-global state).

Per-request figures are recorded from ``RequestRecord`` by the telemetry worker; session-store
figures are read from the store when ``/metrics`` is scraped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.process_memory import resident_bytes
from app.telemetry.observer import RequestRecord

_FAST = (5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
"""Seconds, for the proxy's own work (tokenize, render, proxy-added latency)."""
_TTFT = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60)
"""Seconds, for time to first token (upstream prefill included)."""


class Metrics:
    """The ``toksplice_*`` metrics of one app."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "toksplice_requests", "Chat requests by client API, route and outcome",
            ["api", "route", "outcome"], registry=r,
        )
        self.tokenize_seconds = Histogram(
            "toksplice_tokenize_seconds", "Session tokenization time by route",
            ["route"], buckets=_FAST, registry=r,
        )
        self.render_seconds = Histogram(
            "toksplice_render_seconds", "Chat-template render time", buckets=_FAST, registry=r
        )
        self.proxy_added_seconds = Histogram(
            "toksplice_proxy_added_seconds", "Request received to upstream request sent",
            ["api"], buckets=_FAST, registry=r,
        )
        self.ttft_seconds = Histogram(
            "toksplice_ttft_seconds", "Request received to first answer token sent on",
            ["api"], buckets=_TTFT, registry=r,
        )
        self.prompt_tokens = Counter(
            "toksplice_prompt_tokens", "Prompt tokens sent upstream, by route", ["route"],
            registry=r,
        )
        self.reused_tokens = Counter(
            "toksplice_reused_tokens", "Prompt tokens reused from stored sessions, by route",
            ["route"], registry=r,
        )
        self.fallbacks = Counter(
            "toksplice_fallbacks", "Full encodes by reason", ["reason"], registry=r
        )
        self.shadow_checks = Counter(
            "toksplice_shadow_checks", "Requests whose ids the shadow verifier re-encoded",
            registry=r,
        )
        self.shadow_divergences = Counter(
            "toksplice_shadow_divergences", "Shadow checks whose ids differed from the reference",
            registry=r,
        )
        self.shadow_drops = Counter(
            "toksplice_shadow_drops", "Sampled requests not checked: the shadow queue was full",
            registry=r,
        )
        self.tools_dropped = Counter(
            "toksplice_tools_dropped", "Requests with tools the chat template does not render",
            registry=r,
        )
        self.fields_dropped = Counter(
            "toksplice_client_fields_dropped",
            "Requests setting a harmless field that nothing reads (user, metadata, ...), by field",
            ["field"], registry=r,
        )
        self.trace_drops = Counter(
            "toksplice_trace_drops", "Finished requests not traced: the telemetry queue was full",
            registry=r,
        )

    def record(self, record: RequestRecord) -> None:
        t, prompt = record.timings, record.prompt
        self.requests.labels(t.api, prompt.route, record.outcome).inc()
        self.tokenize_seconds.labels(prompt.route).observe(t.tokenize_s)
        self.render_seconds.observe(t.render_s)
        self.prompt_tokens.labels(prompt.route).inc(prompt.prompt_tokens)
        self.reused_tokens.labels(prompt.route).inc(prompt.reused_tokens)
        if prompt.fallback is not None:
            self.fallbacks.labels(prompt.fallback).inc()
        if t.upstream_sent:
            self.proxy_added_seconds.labels(t.api).observe(t.proxy_added)
        if t.first_token:
            self.ttft_seconds.labels(t.api).observe(t.first_token - t.received)

    def exposition(self, store: Mapping[str, int]) -> bytes:
        """The text format, with the session store's figures as of now."""
        scrape = CollectorRegistry()
        scrape.register(_StoreCollector(store))
        return generate_latest(self.registry) + generate_latest(scrape)


class _StoreCollector(Collector):
    def __init__(self, stats: Mapping[str, int]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats
        yield GaugeMetricFamily(
            "toksplice_session_store_bytes", "Bytes held by stored sessions", stats.get("bytes", 0)
        )
        yield GaugeMetricFamily(
            "toksplice_session_store_sessions", "Stored sessions", stats.get("sessions", 0)
        )
        yield CounterMetricFamily(
            "toksplice_session_store_evictions", "Sessions evicted to stay in budget",
            stats.get("evictions", 0),
        )
        resident = resident_bytes()
        if resident is not None:
            yield GaugeMetricFamily(
                "toksplice_process_resident_bytes",
                "The proxy process's resident memory (RSS), beside the session store's budget",
                resident,
            )
