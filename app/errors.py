"""The exceptions toksplice raises, in one tree.

    TokspliceError
    ├── InvalidTextError        text that no tokenizer can take (not a str, lone surrogates)
    ├── TokenizerSpecError      a tokenizer.json that cannot be loaded or is not supported at all
    ├── TemplateError           a chat template that cannot be loaded, or raised while rendering
    ├── RequestError            the client's request is wrong (HTTP 4xx; ``status`` says which)
    │   ├── BadRequestError         400: malformed JSON, bad fields, content the model lacks
    │   │   ├── ContextOverflowError    the prompt (and the asked output) exceed the context
    │   │   └── SystemTurnError         a system message where the model's template takes none
    │   ├── AuthenticationError     401
    │   ├── PermissionDeniedError   403: an admin endpoint without the admin key
    │   ├── NotFoundError           404: unknown model or route
    │   ├── RequestTimeoutError     408: the client did not send its body in time
    │   └── PayloadTooLargeError    413: body over the configured limit
    └── UpstreamError           the upstream server failed us (HTTP 5xx)
        ├── UpstreamUnavailableError  502: connection refused / reset, malformed reply
        │   └── UpstreamUnreachableError  502: no connection (refused, reset, DNS)
        ├── UpstreamTimeoutError      504: no answer in time
        ├── UpstreamStatusError       the upstream answered with an error status (kept as is)
        └── UpstreamNotReadyError     503: the startup checks have not passed yet

Services raise these; each client API maps them to its own error JSON at one boundary
(``app.api.errors``).  ``reason`` is the short machine name that logs and metrics count
refusals by.
"""

from __future__ import annotations


class TokspliceError(Exception):
    """Base class of every error toksplice raises on purpose."""

    status: int = 500
    kind: str = "server_error"

    @property
    def reason(self) -> str:
        """``ContextOverflowError`` -> ``"context_overflow"``: what logs and metrics say."""
        name = type(self).__name__.removesuffix("Error")
        return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


class InvalidTextError(TokspliceError, ValueError):
    """The input is not text the reference tokenizer accepts (non-str, lone surrogates)."""

    status = 400
    kind = "invalid_request_error"


class TokenizerSpecError(TokspliceError, ValueError):
    """The tokenizer file cannot be read or describes a model toksplice cannot run."""


class TemplateError(TokspliceError, ValueError):
    """A chat template failed: it could not be loaded, or it raised on these messages
    (``raise_exception`` in the template, an undefined name, a type error)."""

    status = 400
    kind = "invalid_request_error"


class RequestError(TokspliceError):
    """The client's request cannot be served as sent."""

    status = 400
    kind = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class BadRequestError(RequestError):
    status = 400


class ContextOverflowError(BadRequestError):
    """The prompt does not fit the model's context, or leaves less room than the client's
    output limit asks for.  Each client API words it as its own server does, so that a
    client's recovery (shorter history, a lower ``max_tokens``) triggers."""

    def __init__(self, *, prompt_tokens: int, max_tokens: int | None, context: int) -> None:
        self.prompt_tokens, self.max_tokens, self.context = prompt_tokens, max_tokens, context
        asked = "" if max_tokens is None else f" and {max_tokens} to generate"
        super().__init__(
            f"{prompt_tokens} prompt tokens{asked} do not fit the model's context of "
            f"{context} tokens",
            param="messages",
        )

    @property
    def prompt_fits(self) -> bool:
        """The prompt alone fits: only the output limit is too large."""
        return self.prompt_tokens < self.context


class SystemTurnError(BadRequestError):
    """A ``system`` message inside the conversation that the model's chat template refuses
    there (it takes one only first): the client should resend without such turns."""

    def __init__(self, index: int, detail: str) -> None:
        super().__init__(
            "role 'system' is not supported on this model after the first message: its chat "
            f"template refuses a system turn there ({detail})",
            param=f"messages[{index}]",
        )


class AuthenticationError(RequestError):
    status = 401
    kind = "authentication_error"


class PermissionDeniedError(RequestError):
    status = 403
    kind = "permission_error"


class NotFoundError(RequestError):
    status = 404
    kind = "not_found_error"


class RequestTimeoutError(RequestError):
    status = 408
    kind = "timeout_error"


class PayloadTooLargeError(RequestError):
    status = 413
    kind = "request_too_large"


class UpstreamError(TokspliceError):
    """The upstream model server did not give a usable answer."""

    status = 502
    kind = "upstream_error"


class UpstreamUnavailableError(UpstreamError):
    status = 502


class UpstreamUnreachableError(UpstreamUnavailableError):
    """No connection to the upstream at all (as opposed to a reply we cannot use)."""


class UpstreamNotReadyError(UpstreamError):
    """The upstream has not yet answered the startup checks (alignment, context), so no ids
    are sent; they run again until it does."""

    status = 503
    kind = "upstream_not_ready"


class UpstreamTimeoutError(UpstreamError):
    status = 504
    kind = "upstream_timeout"


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status; ``status`` is that status."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status
        if status < 500:
            self.kind = "invalid_request_error"
