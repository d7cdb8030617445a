"""The one place exceptions become HTTP answers, in each client API's own error format.

Every answer made here is recorded (``Telemetry.refusals``): a log line, the
``toksplice_refusals_total`` counter and the trace page.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.api.responses import json_response
from app.errors import TokspliceError
from app.protocol.error_bodies import ClientApi, Refusal, refusal_of
from app.telemetry import Telemetry
from app.telemetry.refusals import RefusalRecord

log = logging.getLogger("toksplice")


def refusal(exc: BaseException, api: ClientApi) -> Refusal:
    """How ``api`` answers ``exc``, the HTTP layer's exceptions included."""
    if isinstance(exc, HTTPException):
        missing = exc.status_code == 404
        kind = "not_found_error" if missing else "invalid_request_error"
        return Refusal(exc.status_code, kind, "no_route" if missing else "http", str(exc.detail))
    if isinstance(exc, RequestValidationError):
        return Refusal(400, "invalid_request_error", "validation", str(exc))
    return refusal_of(exc, api)


def record(request: Request, api: ClientApi, answer: Refusal, *, streaming: bool = False) -> None:
    """Log, count and show one error answer (no content of the request)."""
    telemetry: Telemetry | None = getattr(request.app.state, "telemetry", None)
    if telemetry is not None:
        path = request.url.path
        detail = answer.message if answer.status >= 500 else None
        seen = RefusalRecord(
            api, answer.status, answer.reason, path, answer.param, streaming, detail
        )
        telemetry.refusals.record(seen)


def stream_error(request: Request, exc: BaseException, api: ClientApi) -> Refusal:
    """The refusal a stream's error event carries (the status was sent already), recorded."""
    answer = refusal(exc, api)
    record(request, api, answer, streaming=True)
    return answer


def error_response(request: Request, exc: BaseException, api: ClientApi) -> Response:
    """The error answer for ``exc``, recorded."""
    answer = refusal(exc, api)
    if answer.unexpected:
        log.error("unhandled error", exc_info=exc)
    record(request, api, answer)
    return json_response(answer.body(api), answer.status)


def api_of(path: str) -> ClientApi:
    """Which client API a path belongs to (for errors raised before a route ran)."""
    if path.startswith("/v1/messages"):
        return "messages"
    if path.startswith("/v1/responses"):
        return "responses"
    return "chat"


def install(app: FastAPI) -> None:
    async def handle(request: Request, exc: Exception) -> Response:
        return error_response(request, exc, api_of(request.url.path))

    # Exception itself last: Starlette answers it in its outermost middleware and then
    # re-raises (a traceback in the log), which only a bug should cost.  RecursionError and
    # TypeError come before it for requests nested too deeply (``error_bodies._too_deep``).
    for kind in (TokspliceError, RecursionError, TypeError, HTTPException,
                 RequestValidationError, Exception):  # fmt: skip
        app.add_exception_handler(kind, handle)
