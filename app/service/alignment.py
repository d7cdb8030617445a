"""What the proxy learns from the upstream before sending ids: that it tokenizes exactly as
we do, and the model's context.

Sending ids is only safe if the upstream's model uses the same tokenizer; a mismatch (a wrong
tokenizer.json, a different revision) would silently degrade every answer.  The probes are a
rendered sample conversation (the template's own special tokens) and texts that stress
pre-tokenizers; each is tokenized by the upstream's ``/tokenize`` and compared with ours.

An upstream that does not answer at all (no connection, a timeout, a 5xx such as llama.cpp's
503 while it loads the model) has told us nothing: ``learn`` raises ``UpstreamNotReadyError``
and the caller tries again (``app.upstream.readiness``, which also runs the check again after
the upstream's connection broke and at an interval: a restarted server may be another model).
One that answers without a usable ``/tokenize`` gets ids unverified, as before.

The check renders and tokenizes, so it is the service's work; what it learns
(``app.upstream.learned``) belongs to the upstream.
"""

from __future__ import annotations

import logging

from app.errors import (
    UpstreamError,
    UpstreamNotReadyError,
    UpstreamStatusError,
    UpstreamTimeoutError,
    UpstreamUnreachableError,
)
from app.rendering import ChatTemplate
from app.sessions import SessionTokenizer
from app.upstream.client import UpstreamClient
from app.upstream.dialect import Dialect
from app.upstream.learned import Alignment, Learned

log = logging.getLogger("toksplice")

PROBES = (
    "Hello, world! It's 2026-11-29 and we've shipped v1.2.3 (build 4567890).",
    "def f(x):\n\treturn x  # trailing   \r\n\n\n    indented\u00a0nbsp",
    "日本語のテキスト、한국어, кириллица, العربية, हिन्दी, ไทย, 🇯🇵👩🏽‍💻 e\u0301",
    "   leading spaces, 12345678901234567890, DON'T, I'LL, they're, ’curly’",
    '{"json": [1, 2.5e-3, true, null], "path": "/usr/local/bin"}\n',
)
SAMPLE_CONVERSATION = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "List the files, then tell me what's in README.md."},
    {"role": "assistant", "content": "Sure."},
    {"role": "user", "content": "Thanks! Now run the tests: `pytest -q`."},
]


async def learn(
    client: UpstreamClient,
    dialect: Dialect,
    tokenizer: SessionTokenizer,
    template: ChatTemplate,
    model: str,
    *,
    check: bool,
) -> Learned:
    """The model's context, and the alignment check when ``check``; raises
    ``UpstreamNotReadyError`` while the upstream does not answer."""
    path, body = dialect.context_request(model)
    try:
        payload = await (client.post_json(path, body) if body else client.get_json(path))
        context = dialect.context_response(payload, model) if isinstance(payload, dict) else None
    except UpstreamError as exc:
        _raise_if_silent(exc)
        context = None
    if context is None:
        log.warning(
            "the upstream's %s does not say the model's context: calls without a limit get "
            "the server's default",
            path,
        )
    alignment = None
    if check:
        alignment = await check_alignment(client, dialect, tokenizer, template, model)
    return Learned(alignment, context)


def _raise_if_silent(exc: UpstreamError) -> None:
    """Re-raise as ``UpstreamNotReadyError`` when ``exc`` means the upstream did not answer."""
    silent = isinstance(exc, UpstreamUnreachableError | UpstreamTimeoutError) or (
        isinstance(exc, UpstreamStatusError) and exc.upstream_status >= 500
    )
    if silent:
        raise UpstreamNotReadyError(f"the upstream has not answered yet: {exc}") from exc


async def check_alignment(
    client: UpstreamClient,
    dialect: Dialect,
    tokenizer: SessionTokenizer,
    template: ChatTemplate,
    model: str,
) -> Alignment:
    texts = [template.render(SAMPLE_CONVERSATION), *PROBES]
    mismatches = []
    for text in texts:
        path, body = dialect.tokenize_request(text, model)
        try:
            theirs = dialect.tokenize_response(await client.post_json(path, body))
        except (UpstreamError, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, UpstreamError):
                _raise_if_silent(exc)
            log.warning(
                "alignment check skipped: the upstream's %s failed (%s); sending "
                "token ids unverified",
                path,
                exc,
            )
            return Alignment(verified=False)
        ours = tokenizer.reference.tokenizer.encode(text, add_special_tokens=False).ids
        if list(theirs) != list(ours):
            mismatches.append(text[:60])
    return Alignment(verified=True, mismatches=mismatches)
