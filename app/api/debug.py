"""``GET /metrics`` (Prometheus) and the trace page ``GET /debug/traces`` (with its JSON at
``/debug/traces.json`` and its script and style under ``/debug/static/``).

They show what the proxy does, not what clients said, but they are still for operators only:
served when the proxy is bound to a loopback host, or to requests carrying the configured
``admin_key`` (``Authorization: Bearer <key>`` or ``x-admin-key``).  Otherwise 404 (no admin
key configured) or 403 (a missing or wrong key), as OpenAI-style error JSON.
"""

from __future__ import annotations

import hmac
import ipaddress
from importlib import resources

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from app.api.responses import json_response
from app.errors import NotFoundError, PermissionDeniedError
from app.service.chat import ChatService
from app.telemetry import Telemetry

_STATIC = {"traces.js": "text/javascript", "traces.css": "text/css"}
_DATA_MARK = "/*TRACES*/"


def require_admin(request: Request) -> None:
    settings = request.app.state.settings
    if _is_loopback(settings.host):
        return
    key = settings.admin_key
    if not key:
        raise NotFoundError(
            f"{request.url.path} is served only when toksplice listens on a loopback host, "
            "or with an admin key configured (--admin-key / TOKSPLICE_ADMIN_KEY)"
        )
    offered = request.headers.get("x-admin-key") or _bearer(request.headers.get("authorization"))
    if offered is None or not hmac.compare_digest(offered.encode(), key.encode()):
        raise PermissionDeniedError(
            f"{request.url.path} needs the admin key: send 'Authorization: Bearer <admin key>' "
            "or 'x-admin-key: <admin key>'"
        )


router = APIRouter(dependencies=[Depends(require_admin)])


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    telemetry: Telemetry = request.app.state.telemetry
    service: ChatService = request.app.state.chat
    body = telemetry.metrics.exposition(service.tokenizer.store.stats())
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/debug/traces.json")
async def traces_json(request: Request) -> Response:
    return json_response(_traces(request))


@router.get("/debug/traces")
async def traces_page(request: Request) -> Response:
    """The page, with the recent requests inlined (it renders without a second request)."""
    data = orjson.dumps(_traces(request)).decode().replace("</", "<\\/")
    page = _asset("traces.html").replace(_DATA_MARK, data)
    return Response(page, media_type="text/html; charset=utf-8")


@router.get("/debug/static/{name}")
async def static(name: str) -> Response:
    if name not in _STATIC:
        raise NotFoundError(f"no static file {name!r}")
    return Response(_asset(name), media_type=_STATIC[name])


def _traces(request: Request) -> dict[str, list[dict[str, object]]]:
    """The recent requests that reached the upstream, and the recent error answers."""
    telemetry: Telemetry = request.app.state.telemetry
    requests = telemetry.ring.requests() if telemetry.ring is not None else []
    return {"requests": requests, "refused": telemetry.refusals.recent()}


def _asset(name: str) -> str:
    return (resources.files("app.telemetry") / "static" / name).read_text(encoding="utf-8")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bearer(header: str | None) -> str | None:
    if header and header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return None
