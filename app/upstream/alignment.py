"""Startup check that the upstream tokenizes exactly as we do.

Sending ids is only safe if the upstream's model uses the same tokenizer; a mismatch (a wrong
tokenizer.json, a different revision) would silently degrade every answer.  The probes are a
rendered sample conversation (the template's own special tokens) and texts that stress
pre-tokenizers; each is tokenized by the upstream's ``/tokenize`` and compared with ours.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from app.errors import UpstreamError
from app.rendering import ChatTemplate
from app.tokenization import SessionTokenizer
from app.upstream.client import UpstreamClient
from app.upstream.dialect import Dialect

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


@dataclass(frozen=True, slots=True)
class Alignment:
    verified: bool
    """False when the upstream has no usable /tokenize (ids are sent, unverified)."""
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


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
