"""What one request did, observed at the points the chat service passes anyway.

The request path only takes ``perf_counter`` marks and keeps a reference or two; everything
else (spans, histograms, the trace page) is built from the finished ``RequestRecord`` by the
telemetry worker thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from app.errors import TokspliceError
from app.telemetry.timings import Timings
from app.tokenization import Encoding


@dataclass(frozen=True, slots=True)
class Exchange:
    """What the service tells telemetry of one upstream exchange as it starts."""

    timings: Timings
    encoding: Encoding
    model: str
    provider: str
    """The upstream dialect (``gen_ai.provider.name``)."""
    stream: bool
    on_sent: Callable[[], None] | None = None
    """Work left for when the request is on its way upstream (the shadow verifier's copy of
    a sampled prompt): it runs once the request body is written, or at the latest when the
    exchange ends (a transport without httpcore's trace events)."""


@dataclass(frozen=True, slots=True)
class PromptTokens:
    """How a request's prompt was tokenized, as its trace and metrics show it: figures only.
    A record outlives its request in the trace ring (``--trace-ring`` of them), so it keeps no
    ids: each id array is a view that keeps its whole buffer alive (a megabyte for a
    1M-character prompt), and a session whose every call copies its ids (an edit near the
    start) would pin one per record, outside the session store's budget."""

    route: str
    prompt_tokens: int
    reused_tokens: int
    encoded_bytes: int
    searches: int
    retries: int
    window: int
    parallel_chunks: int
    fallback: str | None
    lookup_s: float

    @classmethod
    def of(cls, encoding: Encoding) -> PromptTokens:
        e = encoding
        return cls(
            e.route, len(e.ids), e.reused_tokens, e.encoded_bytes, e.searches, e.retries,
            e.window, e.parallel_chunks, e.fallback, e.lookup_s,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request: its marks, how its prompt was tokenized, and how it ended."""

    timings: Timings
    prompt: PromptTokens
    model: str
    provider: str
    """The upstream dialect (``gen_ai.provider.name``)."""
    stream: bool
    outcome: str
    """"ok", "cancelled" (the client went away) or the error's kind."""
    finish_reason: str | None
    usage: dict[str, Any] | None
    """The answer's OpenAI-style usage, when the upstream reported it."""


class RequestObserver:
    """Context manager around one upstream exchange; hands a ``RequestRecord`` to ``sink``
    when it exits (normally, by an error, or because the client went away)."""

    __slots__ = ("_exchange", "_finish_reason", "_on_sent", "_sink", "_usage", "timings")

    def __init__(self, exchange: Exchange, sink: Callable[[RequestRecord], None]) -> None:
        self._exchange = exchange
        self._sink = sink
        self.timings = exchange.timings
        self._on_sent = exchange.on_sent
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None

    def __enter__(self) -> RequestObserver:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.timings.finished = time.perf_counter()
        self._sent()
        exchange = self._exchange
        self._sink(
            RequestRecord(
                timings=self.timings,
                prompt=PromptTokens.of(exchange.encoding),
                model=exchange.model,
                provider=exchange.provider,
                stream=exchange.stream,
                outcome=_outcome(error),
                finish_reason=self._finish_reason,
                usage=self._usage,
            )
        )

    async def http_trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx's ``trace`` extension: marks a new connection's connect (and TLS), and
        runs ``on_sent`` once the request body is written."""
        if event.endswith(".send_request_body.complete"):
            self._sent()
        elif event == "connection.connect_tcp.started":
            self.timings.upstream_connecting = time.perf_counter()
        elif event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            self.timings.upstream_connected = time.perf_counter()

    def _sent(self) -> None:
        on_sent, self._on_sent = self._on_sent, None
        if on_sent is not None:
            on_sent()

    def accepted(self) -> None:
        """The upstream's response headers arrived."""
        self.timings.upstream_first_byte = time.perf_counter()

    def chunk(self, chunk: dict[str, Any]) -> None:
        """An OpenAI ``chat.completion.chunk`` on its way to the client."""
        choices = chunk.get("choices")
        choice = choices[0] if choices else None
        if choice is not None:
            self._finish_reason = choice.get("finish_reason") or self._finish_reason
            if not self.timings.first_token and (_has_answer(choice) or self._finish_reason):
                self.timings.first_token = time.perf_counter()
        if chunk.get("usage"):
            self._usage = chunk["usage"]

    def reply(self, reply: dict[str, Any]) -> dict[str, Any]:
        """A whole (non-streamed) chat completion; returns it."""
        self.timings.upstream_first_byte = self.timings.first_token = time.perf_counter()
        choices = reply.get("choices")
        if choices:
            self._finish_reason = choices[0].get("finish_reason")
        self._usage = reply.get("usage")
        return reply


def _has_answer(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta")
    return bool(
        delta
        and (delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"))
    )


def _outcome(error: BaseException | None) -> str:
    if error is None:
        return "ok"
    if isinstance(error, TokspliceError):
        return error.kind
    if isinstance(error, GeneratorExit | asyncio.CancelledError):
        return "cancelled"
    return "server_error"
