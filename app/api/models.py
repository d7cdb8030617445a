"""``GET /v1/models`` and the health endpoints."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.responses import json_response
from app.errors import NotFoundError, UpstreamError
from app.service.chat import ChatService

router = APIRouter()
listing = APIRouter()
"""``/v1/models``, behind the proxy's API keys; ``router`` holds the open health checks."""


@listing.get("/v1/models")
async def models(request: Request) -> Response:
    return json_response({"object": "list", "data": [_card(request.app.state.chat)]})


@listing.get("/v1/models/{model:path}")
async def model(request: Request, model: str) -> Response:
    """One model, as both SDKs' ``models.retrieve`` ask for it; 404 for any other name."""
    service: ChatService = request.app.state.chat
    if model not in (service.card.name, service.card.upstream_name):
        raise NotFoundError(
            f"model: {model} does not exist; this proxy serves {service.card.name!r}",
            param="model",
        )
    return json_response(_card(service))


def _card(service: ChatService) -> dict[str, object]:
    card: dict[str, object] = {
        "id": service.card.name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "toksplice",
    }
    if service.card.context_tokens is not None:
        card["context_window"] = service.card.context_tokens
    return card


@router.api_route("/api/hello", methods=["GET", "HEAD"])
async def hello() -> Response:
    """Claude Code's connectivity probe of its API host, once per start: answered, so that
    it is not an error in the log and the refusal counts."""
    return json_response({"status": "ok"})


@router.get("/health/live")
async def live() -> Response:
    """Liveness: the process serves requests."""
    return json_response({"status": "ok"})


@router.get("/health")
@router.get("/health/ready")
async def health(request: Request) -> Response:
    """Readiness: tokenizer loaded, the upstream answering its own health check, and (with
    the alignment check on) that check answered; asking runs it again if it has not."""
    service: ChatService = request.app.state.chat
    upstream = "ok"
    try:
        await service.readiness.ensure()
        reply = await service.client.get("/health")
        if reply.status_code != 200:
            upstream = f"status {reply.status_code}"
    except UpstreamError as exc:
        upstream = str(exc)
    ready = upstream == "ok"
    body = {
        "status": "ok" if ready else "unavailable",
        "upstream": upstream,
        "model": service.card.name,
        "dialect": service.dialect.name,
        "sending": "text" if service.card.send_text else "token ids",
        "alignment": service.readiness.state(),
        "context_tokens": service.card.context_tokens,
        "tokenizer": service.tokenizer.spec.family,
        "tool_format": service.card.tool_format,
        "strip_billing_line": service.card.strips_billing_line,
        "reasoning": service.reasoning_style(),
    }
    return json_response(body, 200 if ready else 503)
