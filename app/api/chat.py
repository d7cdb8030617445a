"""``POST /v1/chat/completions``."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.body import json_body
from app.api.disconnect import unless_disconnected
from app.api.errors import error_response, stream_error
from app.api.responses import json_response, sse_response
from app.errors import TokspliceError
from app.protocol.openai_chat import parse_chat_request
from app.protocol.sse import DONE, sse_data
from app.service.callers import body_key, caller_of
from app.service.chat import ChatService
from app.service.timings import Timings
from app.telemetry.trace_context import RequestTrace

router = APIRouter()


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    timings = Timings(received=time.perf_counter(), trace=RequestTrace.of(request.headers))
    service: ChatService = request.app.state.chat
    limit = request.app.state.settings.max_body_bytes
    parsed = await json_body(request, limit, timings, service.bodies, body_key(request.headers))
    body = parsed.body
    chat = parse_chat_request(body, validated=parsed.reused_messages)
    parsed.valid()
    timings.parse_s = time.perf_counter() - timings.received - timings.read_s
    caller = caller_of(request.headers, body)
    continuation = parsed.reused_messages > 0
    prepared = await service.prepare(chat, caller, timings, continuation=continuation)
    if not chat.stream:
        reply = await unless_disconnected(request, service.complete(prepared))
        return json_response(reply, headers=prepared.headers())
    chunks = service.chunks(prepared)
    try:
        await unless_disconnected(request, anext(chunks))  # the upstream accepted it
    except TokspliceError as exc:
        await chunks.aclose()  # type: ignore[attr-defined]
        return error_response(request, exc, "chat")
    return sse_response(_events(request, chunks), headers=prepared.headers())


async def _events(
    request: Request, chunks: AsyncIterator[dict[str, Any] | None]
) -> AsyncIterator[bytes]:
    """OpenAI chat SSE; owns ``chunks`` (closing it cancels the upstream request).  An error
    after the first byte is an ``error`` data line, then ``[DONE]``."""
    try:
        async for chunk in chunks:
            if chunk is not None:
                yield sse_data(chunk)
    except TokspliceError as exc:
        yield sse_data(stream_error(request, exc, "chat").openai())
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]
    yield DONE
