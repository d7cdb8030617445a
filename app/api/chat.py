"""``POST /v1/chat/completions``: the canonical chat request itself, served by the pipeline
(``app.api.pipeline``).  A stream's error after its first byte is an ``error`` data line,
then ``[DONE]``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from app.api.pipeline import ClientApi, routes_of
from app.protocol.error_bodies import ApiName, Refusal
from app.protocol.incremental_json import ParsedBody
from app.protocol.openai_chat import ChatRequest, parse_chat_request
from app.protocol.sse import DONE, sse_data


class _Stream:
    def start(self) -> Iterable[bytes]:
        return ()

    def feed(self, chunk: dict[str, Any]) -> Iterable[bytes]:
        return (sse_data(chunk),)

    def fail(self, refusal: Refusal) -> Iterable[bytes]:
        return sse_data(refusal.openai()), DONE

    def finish(self) -> Iterable[bytes]:
        return (DONE,)


@dataclass(frozen=True, slots=True)
class _Call:
    chat: ChatRequest

    def reply(self, completion: dict[str, Any], n_ids: int) -> Any:
        return completion

    def stream(self, n_ids: int) -> _Stream:
        return _Stream()


class ChatApi(ClientApi):
    name: ApiName = "chat"
    paths = ("/v1/chat/completions",)

    def call(self, app: FastAPI, parsed: ParsedBody, key: str) -> _Call:
        strip = app.state.chat.card.strips_billing_line
        chat = parse_chat_request(
            parsed.body, validated=parsed.reused_messages, strip_billing_line=strip
        )
        return _Call(chat)


API = ChatApi()
router = routes_of(API)
