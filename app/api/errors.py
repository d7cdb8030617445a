"""Errors as each client API spells them; the one place exceptions become HTTP answers."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.api.responses import json_response
from app.errors import RequestError, TokspliceError

log = logging.getLogger("toksplice")


def openai_error(exc: Exception) -> tuple[int, dict[str, Any]]:
    """(HTTP status, OpenAI error JSON) for any exception."""
    if isinstance(exc, TokspliceError):
        param = exc.param if isinstance(exc, RequestError) else None
        return exc.status, _openai_body(str(exc), exc.kind, exc.status, param)
    if isinstance(exc, HTTPException):
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return exc.status_code, _openai_body(str(exc.detail), kind, exc.status_code)
    if isinstance(exc, RequestValidationError):
        return 400, _openai_body(str(exc), "invalid_request_error", 400)
    if _too_deep(exc):
        # JSON nested within the parser's limit (1,024 levels) but deeper than the walks of
        # rendering and masking or orjson's serializer (254): the client's request, not our
        # failure.  One line, not the traceback of a thousand frames.
        log.warning("refused a request nested too deeply (%s)", exc)
        return 400, _openai_body("the request is nested too deeply", "invalid_request_error", 400)
    log.exception("unhandled error", exc_info=exc)
    return 500, _openai_body("internal error", "server_error", 500)


def _too_deep(exc: Exception) -> bool:
    """Python's recursion limit, or orjson's (a ``TypeError`` when serializing)."""
    return isinstance(exc, RecursionError) or (
        isinstance(exc, TypeError) and str(exc) == "Recursion limit reached"
    )


def _openai_body(message: str, kind: str, status: int, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
}


def anthropic_error(exc: Exception) -> tuple[int, dict[str, Any]]:
    """(HTTP status, Anthropic error JSON) for any exception: same statuses as OpenAI's."""
    status, body = openai_error(exc)
    kind = _ANTHROPIC_TYPES.get(status, "api_error")
    return status, {"type": "error", "error": {"type": kind, "message": body["error"]["message"]}}


def anthropic_error_response(exc: Exception) -> Response:
    status, body = anthropic_error(exc)
    return json_response(body, status)


def error_response(exc: Exception) -> Response:
    status, body = openai_error(exc)
    if status >= 500:
        log.warning("request failed: %s", exc)
    return json_response(body, status)


def install(app: FastAPI) -> None:
    async def handle(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/v1/messages"):
            return anthropic_error_response(exc)
        return error_response(exc)

    # RecursionError and TypeError answered here, not by the catch-all (which re-raises to
    # the server, which logs the whole traceback): see ``_too_deep``.
    for kind in (TokspliceError, HTTPException, RequestValidationError, RecursionError,
                 TypeError, Exception):  # fmt: skip
        app.add_exception_handler(kind, handle)
