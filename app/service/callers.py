"""Who is calling and which conversation this is: the session key of a request.

The tenant is a digest of the caller's API key (the key itself is never stored), so two
callers never share a session.  The conversation comes from the client when it says
(``X-Session-Id``, Claude Code's ``X-Claude-Code-Session-Id``, Codex's ``session-id``,
OpenAI's ``prompt_cache_key``), with Claude Code's ``X-Claude-Code-Agent-Id`` when present
(its subagents share the session id, each with a transcript of its own); else from a digest
of the conversation's first user message, which stays put while an agent session grows (the
system prompt may not: Claude Code's changes every call).  Two conversations that open with
the same request share a key: ids stay exact (every call is checked against the stored
text), they only repair from each other's state.

The key is computed once, at the edge, before the body is parsed (``edge_caller``): when the
headers name the session, ``tenant/s:<session>`` keys everything remembered of it, the body
memos included (one context, ``app.sessions.registry``).  When only the body can say
(``prompt_cache_key``, or the first user message), the body memos, which run before it is
parsed, can be keyed by the caller only: ``tenant/-``, one context per caller holding the
previous body of each client API, beside the conversation's own context (``session_key``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

SESSION_HEADERS = ("x-session-id", "x-claude-code-session-id", "session-id")
AGENT_HEADER = "x-claude-code-agent-id"
_MAX_SESSION_CHARS = 256


@dataclass(frozen=True, slots=True)
class Caller:
    tenant: str
    session: str | None
    """The client's conversation id, when it sent one."""

    @property
    def key(self) -> str:
        """``tenant/s:<session>``, else ``tenant/-``: the registry key of what is known of the
        caller so far (see the module's docstring)."""
        return f"{self.tenant}/s:{self.session}" if self.session is not None else f"{self.tenant}/-"

    def with_body(self, body: Mapping[str, Any]) -> Caller:
        """The caller once its body is parsed: the body's ``prompt_cache_key`` names the
        session when the headers did not."""
        cache_key = body.get("prompt_cache_key")
        if self.session is not None or not isinstance(cache_key, str):
            return self
        return Caller(tenant=self.tenant, session=cache_key[:_MAX_SESSION_CHARS])


def edge_caller(headers: Mapping[str, str]) -> Caller:
    """The caller as its headers say, before the body is read: its ``key`` keys the body
    memos (``incremental_json``, the client translators)."""
    return Caller(tenant=_tenant(headers), session=_header_session(headers))


def caller_of(headers: Mapping[str, str], body: Mapping[str, Any]) -> Caller:
    return edge_caller(headers).with_body(body)


def session_key(caller: Caller, messages: list[dict[str, Any]]) -> str:
    """``tenant/conversation``, the key the session tokenizer and id cache use: the caller's
    own key when it names its session, else a digest of the first user message."""
    if caller.session is not None:
        return caller.key
    first = next((m for m in messages if m.get("role") == "user"), messages[0])
    opening = orjson.dumps(first, option=orjson.OPT_SORT_KEYS)
    return f"{caller.tenant}/m:{hashlib.blake2b(opening, digest_size=12).hexdigest()}"


def sent_session(key: str) -> str | None:
    """The session id the client sent (a header or ``prompt_cache_key``; a Claude Code agent's
    key without its agent), read back from a ``session_key``; None for a key made from the
    conversation's content."""
    conversation = key.partition("/")[2]
    if not conversation.startswith("s:"):
        return None
    return conversation[2:].partition("/agent:")[0]


def _tenant(headers: Mapping[str, str]) -> str:
    key = api_key(headers)
    return hashlib.blake2b(key.encode(), digest_size=8).hexdigest() if key else "anon"


def _header_session(headers: Mapping[str, str]) -> str | None:
    session = next((headers[h] for h in SESSION_HEADERS if headers.get(h)), None)
    if session is None:
        return None
    agent = headers.get(AGENT_HEADER)
    half = _MAX_SESSION_CHARS // 2
    return f"{session[:half]}/agent:{agent[:half]}" if agent else session[:_MAX_SESSION_CHARS]


def api_key(headers: Mapping[str, str]) -> str | None:
    """The caller's key for this proxy: ``Authorization: Bearer`` or ``x-api-key``."""
    auth = headers.get("authorization")
    if auth and auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return headers.get("x-api-key") or None
