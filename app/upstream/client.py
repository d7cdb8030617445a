"""The shared HTTP client to the upstream; httpx errors become ``UpstreamError`` here, once."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson

from app.config import Settings
from app.errors import (
    UpstreamError,
    UpstreamStatusError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
    UpstreamUnreachableError,
)
from app.upstream.dialect import Body

TraceHook = Callable[[str, dict[str, Any]], Awaitable[None]]
"""httpx's ``trace`` request extension: called with each connection event's name and info."""


_CLOSED_BEFORE_REPLY = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
"""How a request on a connection the upstream had already closed fails (no response byte)."""


class UpstreamClient:
    """One pooled ``httpx.AsyncClient`` with explicit timeouts and limits."""

    def __init__(self, settings: Settings, transport: httpx.AsyncBaseTransport | None = None):
        headers = {"content-type": "application/json"}
        if settings.upstream_api_key:
            headers["authorization"] = f"Bearer {settings.upstream_api_key}"
        limits = httpx.Limits(
            max_connections=settings.max_connections,
            max_keepalive_connections=min(64, settings.max_connections),
        )
        self.base_url = settings.upstream.rstrip("/")
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
    ) -> AsyncIterator[httpx.Response]:
        """POST ``body``; yields the response once its status is known to be a success.
        ``trace`` sees the connection's events (telemetry times the connect with it);
        ``headers`` are the request's own (its W3C ``traceparent``).

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
                response = await self._http.send(request, stream=True)
            try:
                if response.status_code >= 400:
                    raise _status_error(response.status_code, await response.aread())
                yield response
            finally:
                await response.aclose()
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError(f"upstream timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise UpstreamUnreachableError(
                f"upstream {self.base_url} unreachable: {exc or type(exc).__name__}"
            ) from exc

    async def post_json(
        self,
        path: str,
        body: bytes | Body,
        trace: TraceHook | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        async with self.stream(path, body, trace, headers) as response:
            return _json(await response.aread())

    async def get(self, path: str) -> httpx.Response:
        """A probe (health, context): its connection is closed after the answer rather than
        pooled, where it would only go stale before the next generation request."""
        try:
            return await self._http.get(path, headers={"connection": "close"})
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError("upstream timed out") from exc
        except httpx.TransportError as exc:
            raise UpstreamUnreachableError(f"upstream {self.base_url} unreachable") from exc

    async def get_json(self, path: str) -> Any:
        """GET ``path``'s JSON; an error status raises as for a POST."""
        response = await self.get(path)
        if response.status_code >= 400:
            raise _status_error(response.status_code, response.content)
        return _json(response.content)


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """JSON payloads of an upstream SSE stream's ``data:`` lines, until ``[DONE]``; the rest
    of the body is then read, so that the connection goes back to the pool (httpx closes a
    connection whose response was left unread, and the next call would connect anew)."""
    lines = response.aiter_lines()
    try:
        async for line in lines:
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                await _drain(lines)
                return
            if data:
                payload = _json(data.encode())
                if isinstance(payload, dict) and "error" in payload:
                    raise UpstreamUnavailableError(f"upstream stream error: {payload['error']}")
                yield payload
    except httpx.TimeoutException as exc:
        raise UpstreamTimeoutError("upstream stalled mid-stream") from exc
    except httpx.TransportError as exc:
        raise UpstreamUnavailableError(f"upstream failed mid-stream: {exc!r}") from exc


async def _drain(lines: AsyncIterator[str]) -> None:
    """Reads what follows ``[DONE]`` (normally nothing); the answer is complete, so a failure
    here only costs the connection."""
    with contextlib.suppress(httpx.HTTPError):
        async for _ in lines:
            pass


def _json(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UpstreamUnavailableError(f"upstream sent invalid JSON: {exc}") from exc


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
