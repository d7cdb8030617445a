"""``POST /v1/responses``: the OpenAI Responses API (what Codex CLI speaks), served by the
pipeline (``app.api.pipeline``) translating to the canonical chat request
(``responses_request``) and the chat chunks back (``responses_stream``).

The request body is parsed incrementally like chat's, by a ``BodyParser`` over ``input``
keyed by the caller (``callers.edge_caller``) in a slot of its own, and a ``ChatTranslator``
translates only the items the parser found appended; ``create_app`` builds both inside the
session budget.  Errors before the
upstream accepted the request are OpenAI error JSON with their status; after it, the stream
ends with ``response.failed``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from app.api.pipeline import ClientApi, routes_of
from app.errors import ContextOverflowError
from app.protocol.error_bodies import ApiName, Refusal
from app.protocol.incremental_json import BodyParser, ParsedBody
from app.protocol.openai_chat import ChatRequest, parse_chat_request
from app.protocol.output_options import RESPONSES_FORMAT
from app.protocol.responses_request import ChatTranslator
from app.protocol.responses_stream import (
    Event,
    ResponseStream,
    response_echo,
    response_from_completion,
)
from app.protocol.sse import sse_event


def _parsers(app: FastAPI) -> tuple[BodyParser, ChatTranslator]:
    """The body parser over ``input`` and the translation memo (built by ``create_app``)."""
    parsers: tuple[BodyParser, ChatTranslator] = app.state.responses_parsers
    return parsers


def _sse(events: list[Event]) -> Iterable[bytes]:
    return [sse_event(name, payload) for name, payload in events]


@dataclass(frozen=True, slots=True)
class _Stream:
    stream: ResponseStream

    def start(self) -> Iterable[bytes]:
        return _sse(self.stream.start())

    def feed(self, chunk: dict[str, Any]) -> Iterable[bytes]:
        return _sse(self.stream.feed(chunk))

    def fail(self, refusal: Refusal) -> Iterable[bytes]:
        return _sse(self.stream.fail(refusal.message, refusal.code or refusal.kind))

    def finish(self) -> Iterable[bytes]:
        return _sse(self.stream.finish())


@dataclass(frozen=True, slots=True)
class _Call:
    chat: ChatRequest
    echo: dict[str, Any]
    """The request fields a Response object repeats."""

    def reply(self, completion: dict[str, Any], n_ids: int) -> Any:
        return response_from_completion(completion, model=self.chat.model, echo=self.echo)

    def stream(self, n_ids: int) -> _Stream:
        return _Stream(ResponseStream(model=self.chat.model, echo=self.echo))


class ResponsesApi(ClientApi):
    name: ApiName = "responses"
    paths = ("/v1/responses",)
    streamed_refusals = (ContextOverflowError,)
    """OpenAI streams a context overflow as ``response.failed`` (Codex reads its code there)."""

    def parser(self, app: FastAPI) -> BodyParser:
        return _parsers(app)[0]

    def call(self, app: FastAPI, parsed: ParsedBody, key: str) -> _Call:
        canonical, validated = _parsers(app)[1].translate(parsed.body, key, parsed.reused_messages)
        chat = parse_chat_request(
            canonical,
            validated=validated,
            format_param=RESPONSES_FORMAT,
            strip_billing_line=app.state.chat.card.strips_billing_line,
        )
        return _Call(chat, response_echo(parsed.body))


API = ResponsesApi()
router = routes_of(API)
