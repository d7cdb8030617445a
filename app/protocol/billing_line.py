"""Claude Code's per-call attribution line, dropped from system turns as vLLM 0.33 drops it.

Claude Code opens its system prompt with ``x-anthropic-billing-header: cc_version=...;
cch=...;``, whose ``cch`` changes on every call.  vLLM 0.33's chat parsing
(``_strip_claude_code_billing_header``, run on every ``system`` message of a chat request,
and so of a Responses request, which it parses the same way) takes the first line off each
text part that starts with the header, a string content being one text part, and drops a
part left empty.  SGLang keeps the line.  ``--strip-billing-line auto`` follows the dialect's
server (``Settings.strips_billing_line``).
"""

from __future__ import annotations

from typing import Any

HEADER = "x-anthropic-billing-header"


def strip_content(content: Any) -> Any:
    """A system message's ``content`` (a string or parts) as vLLM hands it on: ``content``
    itself when no text part starts with the header, else its parts (a string is one text
    part) with each such part's first line removed and the parts left empty dropped."""
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(parts, list) or not any(_header_text(p) is not None for p in parts):
        return content
    out: list[Any] = []
    for part in parts:
        text = _header_text(part)
        if text is None:
            out.append(part)
        elif rest := text.partition("\n")[2]:
            out.append(rest if isinstance(part, str) else {**part, "text": rest})
    return out


def strip_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every system message's content stripped (``strip_content``): the
    list itself when nothing changes, else a new list holding new dicts for the changed
    messages only (the others are ``messages``' objects)."""
    out: list[dict[str, Any]] | None = None
    for index, message in enumerate(messages):
        if message.get("role") != "system":
            continue
        content = message.get("content")
        stripped = strip_content(content)
        if stripped is not content:
            out = list(messages) if out is None else out
            out[index] = {**message, "content": stripped}
    return messages if out is None else out


def _header_text(part: Any) -> str | None:
    """The part's text when it is a string or a ``text`` part starting with the header."""
    text = part.get("text") if isinstance(part, dict) and part.get("type") == "text" else part
    return text if isinstance(text, str) and text.startswith(HEADER) else None
