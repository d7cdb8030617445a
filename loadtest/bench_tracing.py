"""Per-request cost of telemetry: the same agent sessions through proxies with it on and off.

    .venv/bin/python loadtest/bench_tracing.py [--chars 20000] [--sessions 16]

Three apps in one process, each in front of the same in-process stand-in upstream
(``httpx.MockTransport``: no network, so the proxy's own time dominates) and driven through
``httpx.ASGITransport``: ``off`` (no tracing, no shadow verifier), ``tracing`` (the default
telemetry without the shadow verifier: marks, metrics, the trace page's ring) and ``default``
(plus the shadow verifier sampling 5%).  Every call of generated agent sessions (Qwen3's
template and tokenizer, calls alternating streamed and whole) goes to each app in turn,
rotating which goes first, so the apps see the same machine load.  Printed per configuration:
request wall time (median, mean, trimmed mean) and the median of the paired differences from
``off``, once for the request alone and once including the telemetry worker's processing of
it (``Telemetry.drain``; the shadow check runs on in its own thread).  Then the components,
timed serially: the request path's telemetry, that plus the worker's metrics and ring, and
the extra cost of building OpenTelemetry spans when an OTLP or console exporter is configured.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx
import orjson
from opentelemetry.sdk.trace import TracerProvider

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.config import Settings
from app.main import create_app
from app.service.chat import ChatService
from app.telemetry import Telemetry
from app.telemetry.observer import Exchange, PromptTokens, RequestRecord
from app.telemetry.spans import SpanExport
from app.telemetry.timings import Timings
from loadtest.agent_sessions import chat_requests

QWEN3 = Path(__file__).resolve().parents[1] / ".assets" / "qwen3"
COMPONENT_RUNS = 5000
HTTP11_EVENTS = [
    f"http11.{step}.{state}"
    for step in ("send_request_headers", "send_request_body", "receive_response_headers")
    for state in ("started", "complete")
] + ["http11.receive_response_body.started", "http11.receive_response_body.complete",
     "http11.response_closed.started", "http11.response_closed.complete"]  # fmt: skip
CONFIGS = {
    "off": {"tracing": False, "shadow_rate": 0.0},
    "tracing": {"shadow_rate": 0.0},
    "default": {},
}


def upstream(request: httpx.Request) -> httpx.Response:
    """A llama.cpp-style /v1/completions answer: three pieces, then the finish."""
    body = orjson.loads(request.content)
    pieces = ["Hello", " there", "!"]
    if not body.get("stream"):
        choice = {"text": "".join(pieces), "index": 0, "finish_reason": "stop"}
        return httpx.Response(200, json={"choices": [choice]})
    events = [{"choices": [{"text": p, "index": 0, "finish_reason": None}]} for p in pieces]
    events.append({"choices": [{"text": "", "index": 0, "finish_reason": "stop"}]})
    data = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    return httpx.Response(200, content=data, headers={"content-type": "text/event-stream"})


@asynccontextmanager
async def proxy(
    options: dict[str, object],
) -> AsyncIterator[tuple[httpx.AsyncClient, Telemetry, ChatService]]:
    settings = Settings(tokenizer=QWEN3, model="default", alignment_check=False, **options)  # type: ignore[arg-type]
    app = create_app(settings, transport=httpx.MockTransport(upstream))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            yield client, app.state.telemetry, app.state.chat


async def main(chars: int, sessions: int) -> None:
    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    totals: dict[str, list[float]] = {name: [] for name in CONFIGS}
    async with AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(proxy(o)) for name, o in CONFIGS.items()}
        names = list(CONFIGS)
        for seed in range(sessions):
            bodies = list(chat_requests(seed, target_chars=chars))
            for k, body in enumerate(bodies):
                payload = orjson.dumps(body | {"stream": k % 2 == 1})
                headers = {"content-type": "application/json", "x-session-id": f"s{seed}"}
                for name in names[k % 3 :] + names[: k % 3]:
                    client, telemetry, _ = clients[name]
                    started = time.perf_counter()
                    reply = await client.post(
                        "/v1/chat/completions", content=payload, headers=headers
                    )
                    await reply.aread()
                    answered = time.perf_counter()
                    telemetry.drain()  # the worker's spans and metrics for this request
                    drained = time.perf_counter()
                    assert reply.status_code == 200, reply.text
                    if k >= 2:  # the first calls of a session warm the template and caches
                        times[name].append(answered - started)
                        totals[name].append(drained - started)
        tracing_app = clients["tracing"][1]
        service = clients["tracing"][2]
        hot, total = await components(tracing_app, service)
        export = span_export_cost(service)
    print(f"{len(times['off'])} requests per configuration, sessions up to {chars:,} chars")
    _table("latency (request sent -> answer read)", times)
    _table("latency + the telemetry worker's work for the request", totals)
    print(
        f"\ncomponents (tracing on, {COMPONENT_RUNS} synthetic requests, one thread): "
        f"request path {hot * 1e6:.1f} us, request path + worker (metrics, ring) "
        f"{total * 1e6:.1f} us; with an OTLP or console exporter the worker also builds "
        f"OpenTelemetry spans: +{export * 1e6:.1f} us"
    )


def span_export_cost(service: ChatService) -> float:
    """Seconds per request to build its OpenTelemetry spans (no exporter attached: the
    exporters' own cost is in their batch threads)."""
    now = time.perf_counter()
    timings = Timings(
        received=now, read_s=1e-5, parse_s=1e-4, render_s=1e-4, tokenize_s=1e-4,
        prepare_started=now + 2e-4, upstream_sent=now + 5e-4, upstream_first_byte=now + 6e-4,
        first_token=now + 7e-4, finished=now + 9e-4, session="bench/export",
    )  # fmt: skip
    encoding = service.tokenizer.encode("a prompt " * 200, session="bench/export")
    prompt = PromptTokens.of(encoding)
    record = RequestRecord(timings, prompt, "default", "llamacpp", True, "ok", "stop", None)
    export = SpanExport(TracerProvider())
    started = time.perf_counter()
    for _ in range(COMPONENT_RUNS):
        export.record(record)
    return (time.perf_counter() - started) / COMPONENT_RUNS


async def components(telemetry: Telemetry, service: ChatService) -> tuple[float, float]:
    """Per-request seconds of the request path's telemetry (observer marks, httpx's trace
    events of a request on a pooled connection, chunk sniffing, the hand-over and the shadow
    sampling draw) and of that plus the worker's metrics and ring, measured serially with a
    real encoding's record."""
    encoding = service.tokenizer.encode("a prompt " * 200, session="bench/components")
    chunk = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
    last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    telemetry.drain()
    hot = 0.0
    started = time.perf_counter()
    for _ in range(COMPONENT_RUNS):
        timings = Timings(received=time.perf_counter(), session="bench/components")
        exchange = Exchange(timings, encoding, "default", "llamacpp", stream=True)
        begin = time.perf_counter()
        telemetry.shadow.offer(service.tokenizer, "bench/components", "", encoding, None)
        with telemetry.observe(exchange) as seen:
            timings.upstream_sent = time.perf_counter()
            for event in HTTP11_EVENTS:
                await seen.http_trace(event, {})
            seen.accepted()
            for _ in range(3):
                seen.chunk(chunk)
            seen.chunk(last)
        hot += time.perf_counter() - begin
    telemetry.drain()
    return hot / COMPONENT_RUNS, (time.perf_counter() - started) / COMPONENT_RUNS


def _table(title: str, times: dict[str, list[float]]) -> None:
    """Figures per configuration, and the median of the paired differences from ``off``
    (the same call, run back to back: machine drift cancels)."""
    print(f"\n{title}")
    base = _figures(times["off"])
    print(f"{'config':<9} {'median ms':>10} {'mean ms':>9} {'trim ms':>9}   paired vs off")
    for name, values in times.items():
        median, mean, trimmed = _figures(values)
        paired = statistics.median(v - o for v, o in zip(values, times["off"], strict=True))
        print(
            f"{name:<9} {median:10.3f} {mean:9.3f} {trimmed:9.3f}   "
            f"{paired * 1e3:+.3f} ms (medians {median / base[0]:.3f}x)"
        )


def _figures(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    cut = len(ordered) // 10
    trimmed = ordered[cut : len(ordered) - cut] or ordered
    scale = 1e3
    return (
        statistics.median(ordered) * scale,
        statistics.fmean(ordered) * scale,
        statistics.fmean(trimmed) * scale,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chars", type=int, default=20_000, help="session size reached")
    parser.add_argument("--sessions", type=int, default=16, help="agent sessions replayed")
    args = parser.parse_args()
    asyncio.run(main(args.chars, args.sessions))
