"""``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` (Anthropic Messages API).

The body becomes the canonical chat request (``anthropic_request``; per session only the
messages that are not the previous call's objects are translated: ``ChatTranslator``),
walks the chat path (``app.api.pipeline``: render, session tokenize, ids upstream) and the
answer is translated back (``anthropic_reply``).  Errors are Anthropic error JSON
(``app.api.errors`` answers so for every path under ``/v1/messages``); after the stream
started, an ``error`` event.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import Response

from app.api.body import json_body
from app.api.pipeline import ClientApi, routes_of
from app.api.responses import json_response
from app.protocol.anthropic_reply import MessageStream, message_from_completion
from app.protocol.anthropic_request import ChatTranslator, to_chat_body
from app.protocol.error_bodies import ApiName, Refusal
from app.protocol.incremental_json import BodyParser, ParsedBody
from app.protocol.openai_chat import ChatRequest, parse_chat_request
from app.protocol.output_options import anthropic_format_param
from app.service.callers import Caller, caller_of
from app.service.chat import ChatService
from app.telemetry.timings import Timings


def translator(app: FastAPI) -> ChatTranslator:
    """The session memo of the Anthropic -> chat translation (built by ``create_app``)."""
    memo: ChatTranslator = app.state.anthropic_translator
    return memo


@dataclass(frozen=True, slots=True)
class _Stream:
    stream: MessageStream

    def start(self) -> Iterable[bytes]:
        return (self.stream.start(),)

    def feed(self, chunk: dict[str, Any]) -> Iterable[bytes]:
        data = self.stream.feed(chunk)
        return (data,) if data else ()

    def fail(self, refusal: Refusal) -> Iterable[bytes]:
        error = refusal.anthropic()["error"]
        return (self.stream.error(error["type"], error["message"]),)

    def finish(self) -> Iterable[bytes]:
        return (self.stream.finish(),)


@dataclass(frozen=True, slots=True)
class _Call:
    chat: ChatRequest

    def reply(self, completion: dict[str, Any], n_ids: int) -> Any:
        return message_from_completion(completion, model=self.chat.model, n_ids=n_ids)

    def stream(self, n_ids: int) -> _Stream:
        return _Stream(MessageStream(model=self.chat.model, n_ids=n_ids))


class MessagesApi(ClientApi):
    name: ApiName = "messages"
    paths = ("/v1/messages", "/v1/messages/count_tokens")

    def parser(self, app: FastAPI) -> BodyParser:
        """Anthropic bodies are remembered apart from chat bodies of the same caller."""
        parser: BodyParser = app.state.anthropic_body
        return parser

    def call(self, app: FastAPI, parsed: ParsedBody, key: str) -> _Call:
        strip = app.state.chat.card.strips_billing_line
        translated = translator(app).translate(parsed.body, key, strip_billing_line=strip)
        chat = parse_chat_request(
            translated.body,
            validated=translated.validated,
            format_param=anthropic_format_param(parsed.body),
        )
        return _Call(chat)


API = MessagesApi()


async def count_tokens(request: Request) -> Response:
    """The exact prompt length: the request rendered and tokenized as ``/v1/messages`` would,
    nothing sent upstream.  Counted in a session of its own (per caller and session), so a
    count of some other text never disturbs the conversation's stored transcript."""
    timings = Timings(received=time.perf_counter(), api="messages")
    service: ChatService = request.app.state.chat
    settings = request.app.state.settings
    parsed = await json_body(request, settings.max_body_bytes, timings)
    translated = to_chat_body(
        parsed.body, strip_billing_line=service.card.strips_billing_line, counting=True
    )
    chat = parse_chat_request(translated.body)
    caller = caller_of(request.headers, parsed.body)
    counter = Caller(tenant=caller.tenant, session=f"count_tokens/{caller.session or ''}")
    prepared = await service.prepare(chat, counter, timings, counting=True)
    return json_response({"input_tokens": len(prepared.encoding.ids)}, headers=prepared.headers())


router = routes_of(API, count_tokens)
