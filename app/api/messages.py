"""``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` (Anthropic Messages API).

The body becomes the canonical chat request (``anthropic_request``; per session only the
messages that are not the previous call's objects are translated: ``ChatTranslator``),
walks the chat path (render, session tokenize, ids upstream) and the answer is translated back
(``anthropic_reply``).  Errors are Anthropic error JSON (``errors.install`` answers so for
every path under ``/v1/messages``); after the stream started, an ``error`` event.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response

from app.api.body import json_body
from app.api.disconnect import unless_disconnected
from app.api.errors import stream_error
from app.api.responses import json_response, sse_response
from app.errors import TokspliceError
from app.protocol.anthropic_reply import MessageStream, message_from_completion
from app.protocol.anthropic_request import ChatTranslator, to_chat_body
from app.protocol.openai_chat import parse_chat_request
from app.service.callers import Caller, body_key, caller_of
from app.service.chat import ChatService
from app.service.timings import Timings
from app.telemetry.trace_context import RequestTrace

router = APIRouter()

BODY_KEY_PREFIX = "anthropic:"
"""Anthropic bodies are remembered apart from chat bodies of the same caller."""


def translator(app: FastAPI) -> ChatTranslator:
    """The session memo of the Anthropic -> chat translation (built by ``create_app``)."""
    memo: ChatTranslator = app.state.anthropic_translator
    return memo


@router.post("/v1/messages")
async def messages(request: Request) -> Response:
    trace = RequestTrace.of(request.headers)
    timings = Timings(received=time.perf_counter(), api="messages", trace=trace)
    service: ChatService = request.app.state.chat
    settings = request.app.state.settings
    key = BODY_KEY_PREFIX + body_key(request.headers)
    parsed = await json_body(request, settings.max_body_bytes, timings, service.bodies, key)
    translated = translator(request.app).translate(
        parsed.body, key, strip_billing_line=settings.strip_billing_line
    )
    chat = parse_chat_request(translated.body, validated=translated.validated)
    parsed.valid()
    timings.parse_s = time.perf_counter() - timings.received - timings.read_s
    caller = caller_of(request.headers, parsed.body)
    continuation = parsed.reused_messages > 0
    prepared = await service.prepare(chat, caller, timings, continuation=continuation)
    n_ids = len(prepared.encoding.ids)
    if not chat.stream:
        reply = await unless_disconnected(request, service.complete(prepared))
        message = message_from_completion(reply, model=chat.model, n_ids=n_ids)
        return json_response(message, headers=prepared.headers())
    chunks = service.chunks(prepared)
    # upstream down or refusing: raises here, answered with a status
    await unless_disconnected(request, anext(chunks))
    events = _events(request, chunks, MessageStream(model=chat.model, n_ids=n_ids))
    return sse_response(events, headers=prepared.headers())


async def _events(
    request: Request, chunks: AsyncIterator[dict[str, Any] | None], stream: MessageStream
) -> AsyncIterator[bytes]:
    yield stream.start()
    try:
        async for chunk in chunks:
            if chunk is not None and (data := stream.feed(chunk)):
                yield data
    except TokspliceError as exc:
        error = stream_error(request, exc, "messages").anthropic()["error"]
        yield stream.error(error["type"], error["message"])
        return
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]
    yield stream.finish()


@router.post("/v1/messages/count_tokens")
async def count_tokens(request: Request) -> Response:
    """The exact prompt length: the request rendered and tokenized as ``/v1/messages`` would,
    nothing sent upstream.  Counted in a session of its own (per caller and session), so a
    count of some other text never disturbs the conversation's stored transcript."""
    timings = Timings(received=time.perf_counter(), api="messages")
    service: ChatService = request.app.state.chat
    settings = request.app.state.settings
    parsed = await json_body(request, settings.max_body_bytes, timings)
    translated = to_chat_body(
        parsed.body, strip_billing_line=settings.strip_billing_line, counting=True
    )
    chat = parse_chat_request(translated.body)
    caller = caller_of(request.headers, parsed.body)
    counter = Caller(tenant=caller.tenant, session=f"count_tokens/{caller.session or ''}")
    prepared = await service.prepare(chat, counter, timings, counting=True)
    return json_response({"input_tokens": len(prepared.encoding.ids)}, headers=prepared.headers())
