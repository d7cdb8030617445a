"""The one place exceptions become HTTP answers, in each client API's own error format.

The domain errors (``app.errors``) carry no HTTP: ``STATUS`` says which status each class is
answered with (the nearest class up its tree that the table names).  Every answer made here
is recorded (``Telemetry.refusals``): a log line, the ``toksplice_refusals_total`` counter and
the trace page.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.api.responses import json_response
from app.errors import (
    AuthenticationError,
    ClientDisconnectedError,
    InvalidTextError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RequestError,
    RequestTimeoutError,
    TemplateError,
    TokspliceError,
    UpstreamError,
    UpstreamNotReadyError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from app.protocol.error_bodies import ApiName, Refusal, refusal_of
from app.telemetry import Telemetry
from app.telemetry.refusals import RefusalRecord

log = logging.getLogger("toksplice")


STATUS: dict[type[TokspliceError], int] = {
    TokspliceError: 500,
    InvalidTextError: 400,
    TemplateError: 400,
    RequestError: 400,
    AuthenticationError: 401,
    PermissionDeniedError: 403,
    NotFoundError: 404,
    RequestTimeoutError: 408,
    PayloadTooLargeError: 413,
    ClientDisconnectedError: 499,  # nginx's: the client went away, the answer reaches no one
    UpstreamError: 502,
    UpstreamNotReadyError: 503,
    UpstreamTimeoutError: 504,
}


def status_of(exc: TokspliceError) -> int:
    """The HTTP status ``exc`` is answered with; an upstream's refusal (4xx) is passed on
    as it is, its failure (5xx) is a bad gateway."""
    if isinstance(exc, UpstreamStatusError) and exc.upstream_status < 500:
        return exc.upstream_status
    return next(STATUS[c] for c in type(exc).__mro__ if c in STATUS)


def refusal(exc: BaseException, api: ApiName) -> Refusal:
    """How ``api`` answers ``exc``, the HTTP layer's exceptions and bugs included."""
    if isinstance(exc, TokspliceError):
        return refusal_of(exc, api, status_of(exc))
    if isinstance(exc, HTTPException):
        missing = exc.status_code == 404
        kind = "not_found_error" if missing else "invalid_request_error"
        return Refusal(exc.status_code, kind, "no_route" if missing else "http", str(exc.detail))
    if isinstance(exc, RequestValidationError):
        return Refusal(400, "invalid_request_error", "validation", str(exc))
    if _too_deep(exc):
        message = "the request is nested too deeply"
        return Refusal(400, "invalid_request_error", "too_deep", message)
    return Refusal(500, "server_error", "internal", "internal error", unexpected=True)


def _too_deep(exc: BaseException) -> bool:
    """JSON nested within the parser's limit (1,024 levels) but deeper than the walks of
    rendering and masking (Python's recursion limit) or orjson's serializer (254, a
    ``TypeError``): the client's request, not our failure, and no traceback to log."""
    return isinstance(exc, RecursionError) or (
        isinstance(exc, TypeError) and str(exc) == "Recursion limit reached"
    )


def record(request: Request, api: ApiName, answer: Refusal, *, streaming: bool = False) -> None:
    """Log, count and show one error answer (no content of the request)."""
    telemetry: Telemetry | None = getattr(request.app.state, "telemetry", None)
    if telemetry is not None:
        path = request.url.path
        detail = answer.message if answer.status >= 500 else None
        seen = RefusalRecord(
            api, answer.status, answer.reason, path, answer.param, streaming, detail
        )
        telemetry.refusals.record(seen)


def stream_error(request: Request, exc: BaseException, api: ApiName) -> Refusal:
    """The refusal a stream's error event carries (the status was sent already), recorded."""
    answer = refusal(exc, api)
    record(request, api, answer, streaming=True)
    return answer


def error_response(request: Request, exc: BaseException, api: ApiName) -> Response:
    """The error answer for ``exc``, recorded."""
    answer = refusal(exc, api)
    if answer.unexpected:
        log.error("unhandled error", exc_info=exc)
    record(request, api, answer)
    return json_response(answer.body(api), answer.status)


class RoutedApi(Protocol):
    """A client API as its routes declare it (``app.api.pipeline.ClientApi``)."""

    @property
    def name(self) -> ApiName: ...

    @property
    def paths(self) -> tuple[str, ...]: ...


OTHER_PATHS: ApiName = "chat"
"""The format of the paths no client API declares (``/v1/models``, unknown ones): OpenAI's."""


class ErrorFormats:
    """Which client API words the errors of a request: the one whose pipeline took it, else
    (an error before a route ran: an unknown path, a missing key) the one under whose declared
    paths it is, the deepest; the table is the routes' own declaration."""

    def __init__(self, apis: Iterable[RoutedApi]) -> None:
        self._by_path: dict[str, ApiName] = {path: api.name for api in apis for path in api.paths}

    def api_of(self, request: Request) -> ApiName:
        taken: ApiName | None = getattr(request.state, "client_api", None)
        return taken if taken is not None else self.under(request.url.path)

    def under(self, path: str) -> ApiName:
        while path:
            if (api := self._by_path.get(path)) is not None:
                return api
            path = path.rpartition("/")[0]
        return OTHER_PATHS


def install(app: FastAPI, apis: Iterable[RoutedApi]) -> None:
    """Answer every error of ``app`` here, in the format ``ErrorFormats(apis)`` picks."""
    formats = ErrorFormats(apis)

    async def handle(request: Request, exc: Exception) -> Response:
        return error_response(request, exc, formats.api_of(request))

    # Exception itself last: Starlette answers it in its outermost middleware and then
    # re-raises (a traceback in the log), which only a bug should cost.  RecursionError and
    # TypeError come before it for requests nested too deeply (``_too_deep``).
    for kind in (TokspliceError, RecursionError, TypeError, HTTPException,
                 RequestValidationError, Exception):  # fmt: skip
        app.add_exception_handler(kind, handle)
