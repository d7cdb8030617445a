"""The exceptions toksplice raises, in one tree.

    TokspliceError
    ├── InvalidTextError        text that no tokenizer can take (not a str, lone surrogates)
    ├── TokenizerSpecError      a tokenizer.json that cannot be loaded or is not supported at all
    ├── TemplateError           a chat template that cannot be loaded, or raised while rendering
    ├── RequestError            the client's request is wrong
    │   ├── BadRequestError         malformed JSON, bad fields, content the model lacks
    │   │   ├── ContextOverflowError    the prompt (and the asked output) exceed the context
    │   │   └── SystemTurnError         a system message where the model's template takes none
    │   ├── AuthenticationError     no valid API key
    │   ├── PermissionDeniedError   an admin endpoint without the admin key
    │   ├── NotFoundError           unknown model or route
    │   ├── RequestTimeoutError     the client did not send its body in time
    │   ├── ClientDisconnectedError the client went away before its answer began
    │   └── PayloadTooLargeError    body over the configured limit
    └── UpstreamError           the upstream server failed us
        ├── UpstreamUnavailableError  connection refused / reset, malformed reply
        │   ├── UpstreamUnreachableError  no connection (refused, reset, DNS)
        │   │   └── UpstreamRetokenizedError  came back tokenizing otherwise: send as text
        │   ├── UpstreamMalformedError    an answer not of the shape its API documents
        │   └── UpstreamTooLargeError     an answer (or one stream line) over the read limits
        ├── UpstreamTimeoutError      no answer in time
        ├── UpstreamTruncatedError    the answer ended without a finish reason
        ├── UpstreamStatusError       the upstream answered with an error status
        └── UpstreamNotReadyError     the startup checks have not passed yet

Services raise these and know nothing of HTTP: which status each one is answered with is
the HTTP boundary's table (``app.api.errors``), which words it in each client API's own error
JSON.  ``kind`` is the error's category (OpenAI's error ``type``); ``reason`` is the short
machine name that logs and metrics count refusals by.
"""

from __future__ import annotations


class TokspliceError(Exception):
    """Base class of every error toksplice raises on purpose."""

    kind: str = "server_error"

    @property
    def reason(self) -> str:
        """``ContextOverflowError`` -> ``"context_overflow"``: what logs and metrics say."""
        name = type(self).__name__.removesuffix("Error")
        return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


class InvalidTextError(TokspliceError, ValueError):
    """The input is not text the reference tokenizer accepts (non-str, lone surrogates)."""

    kind = "invalid_request_error"


class TokenizerSpecError(TokspliceError, ValueError):
    """The tokenizer file cannot be read or describes a model toksplice cannot run."""


class TemplateError(TokspliceError, ValueError):
    """A chat template failed: it could not be loaded, or it raised on these messages
    (``raise_exception`` in the template, an undefined name, a type error)."""

    kind = "invalid_request_error"


class RequestError(TokspliceError):
    """The client's request cannot be served as sent."""

    kind = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class BadRequestError(RequestError):
    """Malformed JSON, bad fields, content the model cannot take."""


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
    kind = "authentication_error"


class PermissionDeniedError(RequestError):
    kind = "permission_error"


class NotFoundError(RequestError):
    kind = "not_found_error"


class RequestTimeoutError(RequestError):
    kind = "timeout_error"


class ClientDisconnectedError(RequestError):
    """The client closed its connection while the proxy waited for the upstream; the
    upstream request was cancelled and the answer reaches no one."""

    kind = "client_closed_request"


class PayloadTooLargeError(RequestError):
    kind = "request_too_large"


class UpstreamError(TokspliceError):
    """The upstream model server did not give a usable answer."""

    kind = "upstream_error"


class UpstreamUnavailableError(UpstreamError):
    """The connection failed, or the reply is not one we can use."""


class UpstreamUnreachableError(UpstreamUnavailableError):
    """No connection to the upstream at all (as opposed to a reply we cannot use)."""


class UpstreamRetokenizedError(UpstreamUnreachableError):
    """The upstream came back from a broken connection tokenizing otherwise than we do: a
    request made of ids for it is not sent; made again, it goes as text."""


class UpstreamMalformedError(UpstreamUnavailableError):
    """An answer (or stream event) whose JSON is not of the shape the upstream's API
    documents: a list for an object, a number for a text, an unknown finish reason."""


class UpstreamTooLargeError(UpstreamUnavailableError):
    """A non-streamed answer, or one line of a stream, over its read limit
    (``--upstream-max-body-bytes``, ``--upstream-max-line-bytes``): reading on would let the
    upstream grow the proxy's memory without bound."""


class UpstreamNotReadyError(UpstreamError):
    """The upstream has not yet answered the startup checks (alignment, context), so no ids
    are sent; they run again until it does."""

    kind = "upstream_not_ready"


class UpstreamTimeoutError(UpstreamError):
    kind = "upstream_timeout"


class UpstreamTruncatedError(UpstreamError):
    """The upstream's answer ended without saying why it ended (no finish reason): a stream
    cut short without ``[DONE]``, an empty stream, a 200 that is not an answer.  Reported as
    an error rather than as a complete answer, which the client could not tell from one."""


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status, ``upstream_status``; one under 500 means
    it refused the request as sent."""

    def __init__(self, message: str, *, upstream_status: int) -> None:
        super().__init__(message)
        self.upstream_status = upstream_status
        if upstream_status < 500:
            self.kind = "invalid_request_error"
