"""The shared HTTP client to the upstream; httpx errors become ``UpstreamError`` here, once."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
from anyio import to_thread

from app import bounded_json
from app.config import Settings
from app.errors import (
    UpstreamError,
    UpstreamMalformedError,
    UpstreamStatusError,
    UpstreamTimeoutError,
    UpstreamTooLargeError,
    UpstreamUnavailableError,
    UpstreamUnreachableError,
)
from app.upstream.dialect import Body

TraceHook = Callable[[str, dict[str, Any]], Awaitable[None]]
"""httpx's ``trace`` request extension: called with each connection event's name and info."""


_CLOSED_BEFORE_REPLY = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
"""How a request on a connection the upstream had already closed fails (no response byte)."""


_ERROR_BODY_BYTES = 64 << 10
"""What is read of an error status's body: enough for its message."""


class UpstreamClient:
    """One pooled ``httpx.AsyncClient`` with explicit timeouts and limits.  What is read from
    the upstream is bounded: a whole answer by ``upstream_max_body_bytes``, a stream's line by
    ``upstream_max_line_bytes`` (``sse_events``); answers are asked for uncompressed, so the
    bytes counted are the bytes held."""

    def __init__(self, settings: Settings, transport: httpx.AsyncBaseTransport | None = None):
        self.max_body_bytes = settings.upstream_max_body_bytes
        self.max_line_bytes = settings.upstream_max_line_bytes
        headers = {"content-type": "application/json", "accept-encoding": "identity"}
        if settings.upstream_api_key:
            headers["authorization"] = f"Bearer {settings.upstream_api_key}"
        limits = httpx.Limits(
            max_connections=settings.max_connections,
            max_keepalive_connections=min(64, settings.max_connections),
        )
        self.base_url = settings.upstream.rstrip("/")
        self.breaks = 0
        """How often the connection to the upstream failed (unreachable, or closed before
        replying): the server may have been replaced since (``app.upstream.readiness``)."""
        self.before_resend: Callable[[bool], Awaitable[None]] | None = None
        """Awaited before a request goes again after such a close, told whether its prompt is
        text (``as_text``); it may refuse it."""
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=settings.timeouts.httpx(),
            limits=limits,
            headers=headers,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        body: bytes | Body,
        trace: TraceHook | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        as_text: bool = False,
    ) -> AsyncIterator[httpx.Response]:
        """POST ``body``; yields the response once its status is known to be a success.
        ``trace`` sees the connection's events (telemetry times the connect with it);
        ``headers`` are the request's own (its W3C ``traceparent``); ``as_text``: its prompt
        is text, not ids.

        A pooled connection the upstream closed while idle (llama.cpp's server closes them
        after 5 s) fails the request before any response byte; that one request is sent again,
        once, on a fresh connection."""
        extensions = {"trace": trace} if trace is not None else None
        if isinstance(body, Body):  # sent part by part: its length said up front, not chunked
            headers = {**(headers or {}), "Content-Length": str(len(body))}
        request = self._http.build_request(
            "POST", path, content=body, headers=headers, extensions=extensions
        )
        try:
            try:
                response = await self._http.send(request, stream=True)
            except _CLOSED_BEFORE_REPLY:
                self.breaks += 1
                if self.before_resend is not None:
                    await self.before_resend(as_text)
                response = await self._http.send(request, stream=True)
            try:
                if response.status_code >= 400:
                    error = await bounded_read(response, _ERROR_BODY_BYTES, cut=True)
                    raise _status_error(response.status_code, error)
                yield response
            finally:
                await response.aclose()
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError(f"upstream timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            self.breaks += 1
            raise UpstreamUnreachableError(
                f"upstream {self.base_url} unreachable: {exc or type(exc).__name__}"
            ) from exc

    async def post_json(
        self,
        path: str,
        body: bytes | Body,
        trace: TraceHook | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        as_text: bool = False,
    ) -> Any:
        async with self.stream(path, body, trace, headers, as_text=as_text) as response:
            data = await bounded_read(response, self.max_body_bytes)
        return await _parsed(data)

    async def get(self, path: str) -> httpx.Response:
        """A probe (health, context), its body read within the limit; its connection is
        closed after the answer rather than pooled, where it would only go stale before the
        next generation request."""
        request = self._http.build_request("GET", path, headers={"connection": "close"})
        try:
            response = await self._http.send(request, stream=True)
            try:
                content = await bounded_read(response, self.max_body_bytes)
            finally:
                await response.aclose()
            return httpx.Response(response.status_code, content=content, request=request)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError("upstream timed out") from exc
        except httpx.TransportError as exc:
            self.breaks += 1
            raise UpstreamUnreachableError(f"upstream {self.base_url} unreachable") from exc

    async def get_json(self, path: str) -> Any:
        """GET ``path``'s JSON; an error status raises as for a POST."""
        response = await self.get(path)
        if response.status_code >= 400:
            raise _status_error(response.status_code, response.content)
        return _json(response.content)


async def bounded_read(response: httpx.Response, limit: int, *, cut: bool = False) -> bytes:
    """The response's body, at most ``limit`` bytes: past it ``UpstreamTooLargeError``, or
    with ``cut`` the first ``limit`` bytes (an error message's start is enough)."""
    declared = response.headers.get("content-length", "")
    if not cut and declared.isdigit() and int(declared) > limit:
        raise UpstreamTooLargeError(
            f"upstream answer of {declared} bytes is over the {limit}-byte limit"
        )
    parts: list[bytes] = []
    size = 0
    async for part in response.aiter_bytes():
        parts.append(part)
        size += len(part)
        if size > limit:
            if cut:
                return b"".join(parts)[:limit]
            raise UpstreamTooLargeError(f"upstream answer is over the {limit}-byte limit")
    return b"".join(parts)


async def sse_events(response: httpx.Response, max_line: int) -> AsyncIterator[tuple[Any, int]]:
    """(JSON payload, its size in bytes) of an upstream SSE stream's ``data:`` lines, until
    ``[DONE]``; the rest of the body is then read (up to ``max_line`` bytes), so that the
    connection goes back to the pool (httpx closes a connection whose response was left
    unread, and the next call would connect anew).  A line over ``max_line`` bytes raises
    ``UpstreamTooLargeError`` before more of it is held."""
    parts = response.aiter_bytes()
    try:
        async for line in sse_lines(parts, max_line):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                await _drain(parts, max_line)
                return
            if data:
                payload = await _parsed(data)
                if isinstance(payload, dict) and "error" in payload:
                    raise UpstreamUnavailableError(f"upstream stream error: {payload['error']}")
                yield payload, len(data)
    except httpx.TimeoutException as exc:
        raise UpstreamTimeoutError("upstream stalled mid-stream") from exc
    except httpx.TransportError as exc:
        raise UpstreamUnavailableError(f"upstream failed mid-stream: {exc!r}") from exc


async def sse_lines(parts: AsyncIterator[bytes], max_line: int) -> AsyncIterator[bytes]:
    """The lines of a byte stream (each ended by LF, CR LF or CR, as SSE's are), without
    their ends; over ``max_line`` bytes raises.  Each part is searched once, so a long line
    costs its length."""
    pending = bytearray()
    async for part in parts:
        if b"\n" not in part and b"\r" not in part:
            pending += part
            _check_line(len(pending), max_line)
            continue
        pending += part
        lines = bytes(pending).splitlines(keepends=True)
        pending.clear()
        last = lines[-1]
        if not last.endswith(b"\n"):  # unfinished, or a "\r" that a "\n" may complete
            pending += lines.pop()
        for line in lines:
            line = line.rstrip(b"\r\n")
            _check_line(len(line), max_line)
            yield line
        _check_line(len(pending), max_line)
    if pending:
        yield bytes(pending).rstrip(b"\r\n")


def _check_line(size: int, limit: int) -> None:
    if size > limit:
        raise UpstreamTooLargeError(f"a line of the upstream's stream is over {limit} bytes")


async def _drain(parts: AsyncIterator[bytes], limit: int) -> None:
    """Reads what follows ``[DONE]`` (normally nothing, at most ``limit`` bytes); the answer
    is complete, so a failure here only costs the connection."""
    with contextlib.suppress(httpx.HTTPError):
        size = 0
        async for part in parts:
            size += len(part)
            if size > limit:
                return


_INLINE_JSON = 256 << 10
"""Answers and events up to this size are parsed on the event loop (at most ~1-2 ms)."""


async def _parsed(data: bytes) -> Any:
    """``_json(data)``, a large answer or event (400K ids: ~5-15 ms) off the event loop."""
    return _json(data) if len(data) <= _INLINE_JSON else await to_thread.run_sync(_json, data)


def _json(data: bytes) -> Any:
    try:
        return bounded_json.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UpstreamMalformedError(f"upstream sent invalid JSON: {exc}") from exc


def _status_error(status: int, body: bytes) -> UpstreamError:
    message = body.decode("utf-8", "replace")[:2000]
    try:
        payload = orjson.loads(body)
        error = payload.get("error", payload) if isinstance(payload, dict) else payload
        if isinstance(error, dict):
            message = str(error.get("message") or message)
    except orjson.JSONDecodeError:
        pass
    if status >= 500:
        return UpstreamStatusError(f"upstream error {status}: {message}", upstream_status=status)
    return UpstreamStatusError(
        f"upstream rejected the request ({status}): {message}", upstream_status=status
    )
