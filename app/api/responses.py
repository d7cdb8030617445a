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


def sse_response(
    body: AsyncIterator[bytes], headers: Mapping[str, str] | None = None
) -> StreamingResponse:
    merged = {"cache-control": "no-cache", "x-accel-buffering": "no", **(headers or {})}
    return StreamingResponse(body, media_type="text/event-stream", headers=merged)
