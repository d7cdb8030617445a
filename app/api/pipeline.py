"""One request pipeline behind the three client APIs (chat completions, Anthropic Messages,
OpenAI Responses).

A ``ClientApi`` says only what differs: which body memo parses its body, how the body becomes
the canonical chat request, and how the answer is encoded back (``ApiCall``: a whole reply or
a ``StreamEncoder``).  ``serve`` does the rest once: read the body within the limits, join the
client's trace, render and tokenize (``ChatService.prepare``), call the upstream, and prime a
stream before its first byte goes out, so that an error until the upstream accepted the
request is an HTTP error with its status and one after it is the API's own error event.  A
request whose ids were not sent because the upstream came back tokenizing otherwise
(``UpstreamRetokenizedError``) is prepared again, as text, and sent once more.
Errors are answered at one boundary, ``app.api.errors``, in the request's API's format.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response

from app.api.body import json_body
from app.api.disconnect import unless_disconnected
from app.api.errors import stream_error
from app.api.responses import json_response, sse_response
from app.errors import TokspliceError, UpstreamRetokenizedError
from app.protocol.error_bodies import ApiName, Refusal
from app.protocol.incremental_json import BodyParser, ParsedBody
from app.protocol.openai_chat import ChatRequest
from app.service.callers import edge_caller
from app.service.chat import ChatService, PreparedChat
from app.telemetry.timings import Timings
from app.telemetry.trace_context import RequestTrace


class StreamEncoder(Protocol):
    """One streamed answer in a client API's SSE events."""

    def start(self) -> Iterable[bytes]:
        """What opens the stream, before the first chunk."""
        ...

    def feed(self, chunk: dict[str, Any]) -> Iterable[bytes]:
        """One OpenAI ``chat.completion.chunk``."""
        ...

    def fail(self, refusal: Refusal) -> Iterable[bytes]:
        """The error event(s) that end a stream the status of which was sent already."""
        ...

    def finish(self) -> Iterable[bytes]:
        """What closes a stream that ended well."""
        ...


class ApiCall(Protocol):
    """One request of a client API, translated: the chat request and its answer's encoders."""

    @property
    def chat(self) -> ChatRequest: ...

    def reply(self, completion: dict[str, Any], n_ids: int) -> Any:
        """The whole answer (an OpenAI chat completion) as the API's JSON; ``n_ids`` is the
        prompt's length in ids."""
        ...

    def stream(self, n_ids: int) -> StreamEncoder: ...


Endpoint = Callable[[Request], Awaitable[Response]]
T = TypeVar("T")


class ClientApi(ABC):
    name: ApiName
    paths: tuple[str, ...]
    """Its routes (``routes_of``), the chat call's first; ``app.api.errors`` answers every
    path under them in this API's error format, also before a route ran (an unknown path, a
    missing key)."""
    streamed_refusals: tuple[type[TokspliceError], ...] = ()
    """Refusals (before the upstream was asked) that this API's own server answers a stream
    with as a failed stream, not as an HTTP error."""

    def parser(self, app: FastAPI) -> BodyParser:
        """The per-session body memo that parses this API's bodies (a slot of its own per API:
        a caller's bodies of two APIs are remembered apart, in the caller's one context)."""
        service: ChatService = app.state.chat
        return service.bodies

    @abstractmethod
    def call(self, app: FastAPI, parsed: ParsedBody, key: str) -> ApiCall:
        """The body translated to the canonical chat request (bad input raises)."""


def routes_of(api: ClientApi, *endpoints: Endpoint) -> APIRouter:
    """``api``'s ``POST`` routes: its first path serves chat calls through ``serve``, the
    others the ``endpoints``, in order."""

    async def chat_call(request: Request) -> Response:
        return await serve(request, api)

    router = APIRouter()
    for path, endpoint in zip(api.paths, (chat_call, *endpoints), strict=True):
        router.add_api_route(path, endpoint, methods=["POST"], name=f"{api.name}:{path}")
    return router


async def serve(request: Request, api: ClientApi) -> Response:
    """The answer to one chat call of ``api``; errors raise to ``app.api.errors``."""
    request.state.client_api = api.name
    trace = RequestTrace.of(request.headers)
    timings = Timings(received=time.perf_counter(), api=api.name, trace=trace)
    service: ChatService = request.app.state.chat
    limit = request.app.state.settings.max_body_bytes
    edge = edge_caller(request.headers)  # the one key of the body memos
    parsed = await json_body(request, limit, timings, api.parser(request.app), edge.key)
    call = api.call(request.app, parsed, edge.key)
    chat = call.chat
    parsed.valid()
    timings.parse_s = time.perf_counter() - timings.received - timings.read_s
    caller = edge.with_body(parsed.body)
    try:
        extended = parsed.new_bytes if parsed.reused_messages > 0 else None
        prepared = await service.prepare(chat, caller, timings, new_bytes=extended)
    except api.streamed_refusals as exc:
        if not chat.stream:
            raise
        return sse_response(_refused(request, api.name, exc, call.stream(0)))  # 0: none sent

    async def again() -> PreparedChat:
        return await service.prepare(chat, caller, timings)

    if not chat.stream:

        async def complete(prepared: PreparedChat) -> dict[str, Any]:
            return await unless_disconnected(request, service.complete(prepared))

        prepared, completion = await _sent(prepared, complete, again)
        n_ids = len(prepared.encoding.ids)
        return json_response(call.reply(completion, n_ids), headers=prepared.headers())

    async def opened(prepared: PreparedChat) -> AsyncIterator[dict[str, Any] | None]:
        chunks = service.chunks(prepared)
        try:
            await unless_disconnected(request, anext(chunks))  # the upstream accepted it
        except TokspliceError:
            await chunks.aclose()  # type: ignore[attr-defined]
            raise
        return chunks

    prepared, chunks = await _sent(prepared, opened, again)
    events = _events(request, api.name, chunks, call.stream(len(prepared.encoding.ids)))
    return sse_response(events, headers=prepared.headers())


async def _sent(
    prepared: PreparedChat,
    send: Callable[[PreparedChat], Awaitable[T]],
    again: Callable[[], Awaitable[PreparedChat]],
) -> tuple[PreparedChat, T]:
    """``send(prepared)``, and the request as sent.  When the upstream came back from a
    broken connection tokenizing otherwise than we do, the request's ids were not sent: it is
    prepared ``again`` (now as text, or refused where the dialect takes ids only) and sent
    once more."""
    try:
        return prepared, await send(prepared)
    except UpstreamRetokenizedError:
        prepared = await again()
        return prepared, await send(prepared)


async def _refused(
    request: Request, api: ApiName, exc: TokspliceError, stream: StreamEncoder
) -> AsyncIterator[bytes]:
    for data in (*stream.start(), *stream.fail(stream_error(request, exc, api))):
        yield data


async def _events(
    request: Request,
    api: ApiName,
    chunks: AsyncIterator[dict[str, Any] | None],
    stream: StreamEncoder,
) -> AsyncIterator[bytes]:
    """The API's SSE; owns ``chunks`` (closing it cancels the upstream request)."""
    try:
        for data in stream.start():
            yield data
        try:
            async for chunk in chunks:
                if chunk is not None:
                    for data in stream.feed(chunk):
                        yield data
        except TokspliceError as exc:
            for data in stream.fail(stream_error(request, exc, api)):
                yield data
            return
        for data in stream.finish():
            yield data
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]
