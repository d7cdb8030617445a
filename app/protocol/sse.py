"""Server-sent events: the one encoder every client API uses."""

from __future__ import annotations

from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"


def sse_data(payload: Any) -> bytes:
    """An unnamed event (OpenAI style)."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def sse_event(name: str, payload: Any) -> bytes:
    """A named event (Anthropic style)."""
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"
