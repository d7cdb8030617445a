"""``POST /v1/chat/completions``."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.body import json_body
from app.api.disconnect import unless_disconnected
from app.api.errors import error_response
from app.api.responses import json_response, primed, sse_response
from app.errors import TokspliceError
from app.protocol.openai_chat import parse_chat_request
from app.service.callers import body_key, caller_of
from app.service.chat import ChatService
from app.service.timings import Timings

router = APIRouter()


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    timings = Timings(received=time.perf_counter())
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
    try:
        stream = await unless_disconnected(request, primed(service.stream(prepared)))
    except TokspliceError as exc:
        return error_response(exc)
    return sse_response(stream, headers=prepared.headers())
