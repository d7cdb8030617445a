"""``continue_final_message``: the rendered chat cut right after the last message's text, so
that the model continues that message (a prefilled answer) instead of starting a new turn.

The cut is the one vLLM gets from transformers' ``apply_chat_template``: the last message's
text (a string, or its last text part) is looked for, stripped of surrounding whitespace,
at its last occurrence in the rendered chat; the chat ends after it, with the message's
trailing whitespace only where the rendered text there is the message exactly as given.  A
template that does not render the text as given (it rewrites or escapes it) cannot be
continued: 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.errors import BadRequestError
from app.pieced_text import PiecedText


def continued(rendered: PiecedText, final: Mapping[str, Any]) -> PiecedText:
    """``rendered`` ending where the ``final`` message's text ends."""
    message = _final_text(final)
    text = rendered.text()
    at = text.rfind(message.strip())
    if at < 0:
        raise BadRequestError(
            "continue_final_message: the chat template does not render the last message's "
            "text as given, so it cannot be continued",
            param="continue_final_message",
        )
    unstripped = at + len(message.lstrip())
    end = unstripped if text[at:unstripped] == message else at + len(message.strip())
    return PiecedText(_pieces_until(rendered, end))


def _final_text(final: Mapping[str, Any]) -> str:
    content = final.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for part in reversed(content):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                return str(part["text"])
    raise BadRequestError(
        "continue_final_message: the last message has no text to continue",
        param="continue_final_message",
    )


def _pieces_until(rendered: PiecedText, end: int) -> list[str]:
    """The pieces of ``rendered`` holding its first ``end`` characters."""
    out: list[str] = []
    left = end
    for piece in rendered.pieces:
        if left <= 0:
            break
        out.append(piece if len(piece) <= left else piece[:left])
        left -= len(piece)
    return out
