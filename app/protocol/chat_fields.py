"""Which fields of a chat completions body a client may set: only the proxy decides what the
upstream is told.

Every top-level field is one of three kinds:

* read: the proxy reads it (rendering, sampling, output format, streaming) and builds the
  upstream request from what it read; the dialects that take the chat body itself (vLLM
  chat) get only these fields (``forwarded``);
* ignored: harmless bookkeeping of OpenAI's own service (``user``, ``metadata``, ``store``,
  ...): dropped, and counted (``toksplice_client_fields_dropped``);
* anything else: a 400 naming the field.  Server-side switches such as vLLM's
  ``kv_transfer_params`` (it points the server at another host's KV cache),
  ``chat_template``, ``echo``, ``add_special_tokens`` or a client's own
  ``prompt_token_ids`` would change what the upstream renders or reads, past the proxy's
  ids; a field the proxy does not know could do the same.

A field set to null is its default and reads as absent.
"""

from __future__ import annotations

from typing import Any

from app.errors import BadRequestError

PASSED_THROUGH = ("top_k", "min_p", "repetition_penalty", "min_tokens", "ignore_eos")
"""Sampling fields the text-out dialects pass through as given (under their own names)."""

READ = frozenset({
    "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream",
    "stream_options", "n", "max_tokens", "max_completion_tokens", "temperature", "top_p",
    "stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias",
    "chat_template_kwargs", "add_generation_prompt", "continue_final_message",
    "reasoning_effort", "response_format", "structured_outputs", "logprobs", "top_logprobs",
    *PASSED_THROUGH,
})  # fmt: skip
IGNORED = frozenset({
    "user", "metadata", "store", "service_tier", "safety_identifier", "prompt_cache_key",
    "prompt_cache_retention",
})  # fmt: skip


def checked_fields(body: dict[str, Any]) -> tuple[str, ...]:
    """The ignored fields ``body`` sets (to be counted); ``BadRequestError`` naming the first
    field that is neither read nor ignored."""
    ignored: list[str] = []
    for name, value in body.items():
        if name in READ or value is None:
            continue
        if name not in IGNORED:
            raise BadRequestError(
                f"'{name}' is not supported: the proxy decides what the upstream server is "
                "told, and this field is not one a client may set",
                param=name,
            )
        ignored.append(name)
    return tuple(ignored)


def forwarded(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a checked ``body`` that an upstream taking the chat body may see."""
    return {name: value for name, value in body.items() if name in READ and value is not None}
