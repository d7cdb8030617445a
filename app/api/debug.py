"""``GET /metrics`` (Prometheus) and the trace page ``GET /debug/traces`` (with its JSON at
``/debug/traces.json`` and its script and style under ``/debug/static/``); ``?session=`` keeps
one session's requests, named by the digest the page shows or by the session id the client
sent.  ``GET /favicon.ico``, which a browser asks for beside any page, is a 204 (to anyone:
no client API's error, no refusal counted).

They show what the proxy does, not what clients said, but they are still for operators only:
served to requests carrying the configured ``admin_key`` (``Authorization: Bearer <key>`` or
``x-admin-key``), and to a connection from a loopback address that carries no proxy header
(``X-Forwarded-For``, ``Forwarded``, ``X-Real-IP``): behind a reverse proxy on the same host
every connection comes from loopback, so the peer alone proves nothing there.  Otherwise 404
(no admin key configured) or 403 (a missing or wrong key), as OpenAI-style error JSON.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable
from importlib import resources

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from app.api.responses import json_response
from app.errors import NotFoundError, PermissionDeniedError
from app.service.callers import sent_session
from app.service.chat import ChatService
from app.telemetry import Telemetry
from app.telemetry.shadow import session_digest

_STATIC = {"traces.js": "text/javascript", "traces.css": "text/css"}
_DATA_MARK = "/*TRACES*/"


_PROXY_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")


def require_admin(request: Request) -> None:
    key = request.app.state.settings.admin_key
    offered = request.headers.get("x-admin-key") or _bearer(request.headers.get("authorization"))
    if key and offered is not None and hmac.compare_digest(offered.encode(), key.encode()):
        return
    proxied = any(h in request.headers for h in _PROXY_HEADERS)
    if not proxied and request.client is not None and _is_loopback(request.client.host):
        return
    if not key:
        raise NotFoundError(
            f"{request.url.path} is served only to loopback clients that come through no "
            "proxy, or with an admin key configured (--admin-key / TOKSPLICE_ADMIN_KEY)"
        )
    raise PermissionDeniedError(
        f"{request.url.path} needs the admin key: send 'Authorization: Bearer <admin key>' "
        "or 'x-admin-key: <admin key>'"
    )


router = APIRouter()
_admin = APIRouter(dependencies=[Depends(require_admin)])


@router.get("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:
    return Response(status_code=204)


@_admin.get("/metrics")
async def metrics(request: Request) -> Response:
    telemetry: Telemetry = request.app.state.telemetry
    service: ChatService = request.app.state.chat
    body = telemetry.metrics.exposition(service.tokenizer.store.stats())
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


@_admin.get("/debug/traces.json")
async def traces_json(request: Request) -> Response:
    return json_response(_traces(request))


@_admin.get("/debug/traces")
async def traces_page(request: Request) -> Response:
    """The page, with the recent requests inlined (it renders without a second request)."""
    data = orjson.dumps(_traces(request)).decode().replace("</", "<\\/")
    page = _asset("traces.html").replace(_DATA_MARK, data)
    return Response(page, media_type="text/html; charset=utf-8")


@_admin.get("/debug/static/{name}")
async def static(name: str) -> Response:
    if name not in _STATIC:
        raise NotFoundError(f"no static file {name!r}")
    return Response(_asset(name), media_type=_STATIC[name])


router.include_router(_admin)  # after its last route: the routes are copied


def _traces(request: Request) -> dict[str, object]:
    """The recent requests that reached the upstream (of the ``?session=`` asked for; ``total``:
    of any session), and the recent error answers."""
    telemetry: Telemetry = request.app.state.telemetry
    ring = telemetry.ring
    wanted = request.query_params.get("session")
    requests = ring.requests(_of_session(wanted) if wanted else None) if ring is not None else []
    total = len(ring) if ring is not None else 0
    return {"requests": requests, "total": total, "refused": telemetry.refusals.recent()}


def _of_session(wanted: str) -> Callable[[str], bool]:
    """Whether a session key is the one ``wanted`` names: its digest, or the client's id."""
    return lambda key: session_digest(key) == wanted or sent_session(key) == wanted


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
