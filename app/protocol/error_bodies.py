"""Errors as each client API's own server words them.

Clients act on the wording, not only on the status: Claude Code shortens its history on
``prompt is too long: N tokens > M maximum``, lowers ``max_tokens`` on ``input length and
`max_tokens` exceed context limit: N + M > C``, and resends without mid-conversation system
turns on ``role 'system' is not supported``; the OpenAI SDKs and Codex read
``code: "context_length_exceeded"``.  So each fault is worded here once per client API, as
Anthropic's and OpenAI's servers word the same fault, and the HTTP boundary (``app.api``) and
the streams' error events build their bodies from the same ``Refusal``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from app.errors import (
    AuthenticationError,
    ContextOverflowError,
    NotFoundError,
    RequestError,
    TokspliceError,
)

ApiName = Literal["chat", "messages", "responses"]

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",  # a wrong method: the request's form, as a 400's
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """One error answer, before it is put in a client API's JSON."""

    status: int
    kind: str
    """OpenAI's ``type`` (``invalid_request_error`` ...); Anthropic's is derived from status."""
    reason: str
    """The short name logs and metrics count it by (``context_overflow`` ...)."""
    message: str
    param: str | None = None
    code: str | None = None
    """OpenAI's ``code`` (``context_length_exceeded``, ``model_not_found`` ...), else None."""
    unexpected: bool = False
    """Not one of ours: a bug, whose traceback the boundary logs."""

    def openai(self) -> dict[str, Any]:
        error = {"message": self.message, "type": self.kind, "param": self.param}
        return {"error": error | {"code": self.code}}

    def anthropic(self) -> dict[str, Any]:
        kind = _ANTHROPIC_TYPES.get(self.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": self.message}}

    def body(self, api: ApiName) -> dict[str, Any]:
        return self.anthropic() if api == "messages" else self.openai()


def refusal_of(exc: TokspliceError, api: ApiName, status: int) -> Refusal:
    """How ``api`` answers ``exc`` with ``status`` (the HTTP boundary's choice:
    ``app.api.errors``, which words the exceptions that are not ours itself)."""
    if isinstance(exc, ContextOverflowError):
        return _overflow(exc, api, status)
    param = exc.param if isinstance(exc, RequestError) else None
    return Refusal(status, exc.kind, exc.reason, str(exc), param, _code(exc))


def _code(exc: TokspliceError) -> str | None:
    if isinstance(exc, NotFoundError) and exc.param == "model":
        return "model_not_found"
    if isinstance(exc, AuthenticationError):
        return "invalid_api_key"
    return None


def _overflow(exc: ContextOverflowError, api: ApiName, status: int) -> Refusal:
    n, asked, context = exc.prompt_tokens, exc.max_tokens, exc.context
    if api == "messages":
        if exc.prompt_fits and asked is not None:
            message = (
                f"input length and `max_tokens` exceed context limit: {n} + {asked} > "
                f"{context}, decrease input length or `max_tokens` and try again"
            )
        else:
            message = f"prompt is too long: {n} tokens > {context - 1} maximum"
        return Refusal(status, "invalid_request_error", exc.reason, message)
    if api == "responses":
        message = (
            f"Your input exceeds the context window of this model ({n} input tokens"
            + ("" if asked is None else f" and max_output_tokens {asked}")
            + f" against a context of {context}). Please adjust your input and try again."
        )
        param = "max_output_tokens" if exc.prompt_fits and asked is not None else "input"
    else:
        if exc.prompt_fits and asked is not None:
            message = (
                f"This model's maximum context length is {context} tokens. However, you "
                f"requested {n + asked} tokens ({n} in the messages, {asked} in the "
                "completion). Please reduce the length of the messages or completion."
            )
        else:
            message = (
                f"This model's maximum context length is {context} tokens. However, your "
                f"messages resulted in {n} tokens. Please reduce the length of the messages."
            )
        param = "messages"
    return Refusal(
        status, "invalid_request_error", exc.reason, message, param, "context_length_exceeded"
    )
