"""OpenAI chat answers -> Anthropic Messages answers: one message, or the SSE event stream.

Usage follows Anthropic's accounting, where a prompt's tokens are ``input_tokens +
cache_read_input_tokens`` (Claude Code adds them up to size its context): when the upstream
reports cached prompt tokens, they move from ``input_tokens`` to
``cache_read_input_tokens``.  While streaming, ``message_start`` carries every id sent (the
cache is not known yet) and ``message_delta`` the final split (the SDK overwrites with it).
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import orjson

from app.generation import stop_string
from app.protocol.sse import sse_event

_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
_SIGNATURE_BYTES = 32


def message_id() -> str:
    return "msg_" + uuid.uuid4().hex


def stop_reason(finish_reason: str | None, stop_sequence: Any = None) -> str:
    """Anthropic's stop reason for an OpenAI finish reason (and the vLLM-style
    ``stop_reason`` beside it: the stop sequence that ended the text, if one did)."""
    if finish_reason == "stop" and stop_string(stop_sequence) is not None:
        return "stop_sequence"
    return _STOP_REASONS.get(finish_reason or "stop", "end_turn")


def usage_of(n_ids: int, usage: dict[str, Any] | None) -> dict[str, Any]:
    """Anthropic usage from the ids sent and an OpenAI usage object (None: not reported)."""
    output = int(usage.get("completion_tokens") or 0) if usage else 0
    details = (usage or {}).get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    if not isinstance(cached, int):
        return {"input_tokens": n_ids, "output_tokens": output}
    cached = min(cached, n_ids)
    return {
        "input_tokens": n_ids - cached,
        "output_tokens": output,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    }


def tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as the ``input`` object (``{}`` when not a JSON object)."""
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def signature(thinking: str) -> str:
    """A thinking block's ``signature``: Anthropic's is opaque to clients, which send it back
    with the block; ours is a digest of the text (integrity, not secrecy), and the request
    translation drops it."""
    return _encoded(
        hashlib.blake2b(thinking.encode("utf-8", "surrogatepass"), digest_size=_SIGNATURE_BYTES)
    )


def _encoded(digest: hashlib.blake2b) -> str:
    return base64.b64encode(digest.digest()).decode("ascii")


def message_from_completion(
    completion: dict[str, Any], *, model: str, n_ids: int
) -> dict[str, Any]:
    """The Anthropic message for an OpenAI ``chat.completion``."""
    choice = completion["choices"][0]
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning:
        content.append(
            {"type": "thinking", "thinking": reasoning, "signature": signature(reasoning)}
        )
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id") or "toolu_" + uuid.uuid4().hex,
                "name": function.get("name", ""),
                "input": tool_input(function.get("arguments", "")),
            }
        )
    return {
        "id": message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(choice.get("finish_reason"), choice.get("stop_reason")),
        "stop_sequence": stop_string(choice.get("stop_reason")),
        "usage": usage_of(n_ids, completion.get("usage")),
    }


class MessageStream:
    """Anthropic SSE events for a sequence of OpenAI chat chunks: ``start()``, ``feed()``
    each chunk, then ``finish()`` (or ``error()`` when the answer broke off)."""

    def __init__(self, *, model: str, n_ids: int) -> None:
        self.model = model
        self.n_ids = n_ids
        self.index = -1
        self.open: str | None = None
        """The kind of the open block: "text", "thinking" or "tool_use:<openai index>"."""
        self.finish_reason: str | None = None
        self.stop_sequence: str | None = None
        self.thinking = hashlib.blake2b(digest_size=_SIGNATURE_BYTES)
        """The open thinking block's text so far, for its signature."""
        self.usage: dict[str, Any] | None = None

    def start(self) -> bytes:
        message: dict[str, Any] = {
            "id": message_id(),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.n_ids, "output_tokens": 0},
        }
        return sse_event("message_start", {"type": "message_start", "message": message}) + (
            sse_event("ping", {"type": "ping"})
        )

    def feed(self, chunk: dict[str, Any]) -> bytes:
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        out: list[bytes] = []
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                out.append(
                    self._delta("thinking", {"type": "thinking_delta", "thinking": reasoning})
                )
                self.thinking.update(reasoning.encode("utf-8", "surrogatepass"))
            if delta.get("content"):
                out.append(self._delta("text", {"type": "text_delta", "text": delta["content"]}))
            for call in delta.get("tool_calls") or []:
                out.append(self._tool_call(call))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
                self.stop_sequence = stop_string(choice.get("stop_reason"))
        return b"".join(out)

    def finish(self) -> bytes:
        usage = usage_of(self.n_ids, self.usage)
        if self.usage is None:
            del usage["input_tokens"]  # nothing new to say: message_start's value stands
        delta = {
            "stop_reason": stop_reason(self.finish_reason, self.stop_sequence),
            "stop_sequence": self.stop_sequence,
        }
        return (
            self._close()
            + sse_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
            + sse_event("message_stop", {"type": "message_stop"})
        )

    @staticmethod
    def error(kind: str, message: str) -> bytes:
        payload = {"type": "error", "error": {"type": kind, "message": message}}
        return sse_event("error", payload)

    def _delta(self, kind: str, delta: dict[str, Any]) -> bytes:
        opened = b""
        if self.open != kind:
            block: dict[str, Any] = (
                {"type": "text", "text": ""}
                if kind == "text"
                else {"type": "thinking", "thinking": "", "signature": ""}
            )
            opened = self._open(kind, block)
        payload = {"type": "content_block_delta", "index": self.index, "delta": delta}
        return opened + sse_event("content_block_delta", payload)

    def _tool_call(self, call: dict[str, Any]) -> bytes:
        kind = f"tool_use:{call.get('index', 0)}"
        function = call.get("function") or {}
        opened = b""
        if self.open != kind:
            block = {
                "type": "tool_use",
                "id": call.get("id") or "toolu_" + uuid.uuid4().hex,
                "name": function.get("name", ""),
                "input": {},
            }
            opened = self._open(kind, block)
        arguments = function.get("arguments")
        if not arguments:
            return opened
        delta = {"type": "input_json_delta", "partial_json": arguments}
        payload = {"type": "content_block_delta", "index": self.index, "delta": delta}
        return opened + sse_event("content_block_delta", payload)

    def _open(self, kind: str, block: dict[str, Any]) -> bytes:
        closed = self._close()
        self.index += 1
        self.open = kind
        payload = {"type": "content_block_start", "index": self.index, "content_block": block}
        return closed + sse_event("content_block_start", payload)

    def _close(self) -> bytes:
        if self.open is None:
            return b""
        signed = b""
        if self.open == "thinking":
            delta = {"type": "signature_delta", "signature": _encoded(self.thinking)}
            payload = {"type": "content_block_delta", "index": self.index, "delta": delta}
            signed = sse_event("content_block_delta", payload)
            self.thinking = hashlib.blake2b(digest_size=_SIGNATURE_BYTES)
        self.open = None
        stop = {"type": "content_block_stop", "index": self.index}
        return signed + sse_event("content_block_stop", stop)
