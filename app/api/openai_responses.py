"""``POST /v1/responses``: the OpenAI Responses API (what Codex CLI speaks), served by
translating to the canonical chat request (``responses_request``) and the chat chunks back
(``responses_stream``).

The request body is parsed incrementally like chat's, by a ``BodyParser`` over ``input``,
keyed ``"responses:" + body_key``, and a ``ChatTranslator`` translates only the items the
parser found appended; ``create_app`` builds both inside the session budget.  Errors before the
upstream accepted the request are OpenAI error JSON with their status; after it, the stream
ends with ``response.failed``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response

from app.api.body import json_body
from app.api.disconnect import unless_disconnected
from app.api.errors import error_response, stream_error
from app.api.responses import json_response, sse_response
from app.errors import ContextOverflowError, TokspliceError
from app.protocol.incremental_json import BodyParser
from app.protocol.openai_chat import parse_chat_request
from app.protocol.responses_request import ChatTranslator
from app.protocol.responses_stream import ResponseStream, response_echo, response_from_completion
from app.protocol.sse import sse_event
from app.service.callers import body_key, caller_of
from app.service.chat import ChatService
from app.service.timings import Timings
from app.telemetry.trace_context import RequestTrace

router = APIRouter()


def _parsers(app: FastAPI) -> tuple[BodyParser, ChatTranslator]:
    """The body parser over ``input`` and the translation memo (built by ``create_app``)."""
    parsers: tuple[BodyParser, ChatTranslator] = app.state.responses_parsers
    return parsers


@router.post("/v1/responses")
async def create_response(request: Request) -> Response:
    trace = RequestTrace.of(request.headers)
    timings = Timings(received=time.perf_counter(), api="responses", trace=trace)
    service: ChatService = request.app.state.chat
    limit = request.app.state.settings.max_body_bytes
    key = "responses:" + body_key(request.headers)
    bodies, translator = _parsers(request.app)
    parsed = await json_body(request, limit, timings, bodies, key)
    original = parsed.body
    canonical, validated = translator.translate(original, key, parsed.reused_messages)
    chat = parse_chat_request(canonical, validated=validated)
    parsed.valid()
    timings.parse_s = time.perf_counter() - timings.received - timings.read_s
    caller = caller_of(request.headers, original)  # reads prompt_cache_key
    echo = response_echo(original)
    try:
        prepared = await service.prepare(
            chat, caller, timings, continuation=parsed.reused_messages > 0
        )
    except ContextOverflowError as exc:
        if not chat.stream:
            raise
        # OpenAI streams this one as response.failed (Codex reads its code there)
        return sse_response(_overflowed(request, exc, ResponseStream(model=chat.model, echo=echo)))
    if not chat.stream:
        completion = await unless_disconnected(request, service.complete(prepared))
        reply = response_from_completion(completion, model=chat.model, echo=echo)
        return json_response(reply, headers=prepared.headers())
    chunks = service.chunks(prepared)
    try:
        await unless_disconnected(request, anext(chunks))  # the upstream accepted it
    except TokspliceError as exc:
        await chunks.aclose()  # type: ignore[attr-defined]
        return error_response(request, exc, "responses")
    events = _events(request, chunks, ResponseStream(model=chat.model, echo=echo))
    return sse_response(events, headers=prepared.headers())


async def _overflowed(
    request: Request, exc: ContextOverflowError, stream: ResponseStream
) -> AsyncIterator[bytes]:
    failed = stream_error(request, exc, "responses")
    for name, payload in [*stream.start(), *stream.fail(failed.message, failed.code or "")]:
        yield sse_event(name, payload)


async def _events(
    request: Request, chunks: AsyncIterator[dict[str, Any] | None], stream: ResponseStream
) -> AsyncIterator[bytes]:
    """Responses SSE; owns ``chunks`` (closing it cancels the upstream request)."""
    try:
        for name, payload in stream.start():
            yield sse_event(name, payload)
        try:
            async for chunk in chunks:
                if chunk is not None:
                    for name, payload in stream.feed(chunk):
                        yield sse_event(name, payload)
        except TokspliceError as exc:
            failed = stream_error(request, exc, "responses")
            for name, payload in stream.fail(failed.message, failed.code or failed.kind):
                yield sse_event(name, payload)
            return
        for name, payload in stream.finish():
            yield sse_event(name, payload)
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]
