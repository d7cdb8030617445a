"""JSON and SSE responses written with orjson."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from starlette.responses import Response, StreamingResponse


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        orjson.dumps(body), status_code=status, headers=headers, media_type="application/json"
    )


async def primed(stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Runs ``stream`` to its first (empty) yield, so that errors before the upstream accepted
    the request raise here, while the status can still be chosen; returns the rest."""
    await anext(stream)

    async def rest() -> AsyncIterator[bytes]:
        try:
            async for chunk in stream:
                yield chunk
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    return rest()


def sse_response(
    body: AsyncIterator[bytes], headers: Mapping[str, str] | None = None
) -> StreamingResponse:
    merged = {"cache-control": "no-cache", "x-accel-buffering": "no", **(headers or {})}
    return StreamingResponse(body, media_type="text/event-stream", headers=merged)
