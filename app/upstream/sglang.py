"""SGLang's native ``/generate`` API with ``input_ids``."""

from __future__ import annotations

from typing import Any

import orjson

from app.errors import UpstreamError
from app.generation import Usage, stop_string
from app.upstream.answers import Answer
from app.upstream.dialect import (
    Body,
    Dialect,
    Generated,
    UpstreamCall,
    positive_int,
    with_ids,
)
from app.upstream.output_fields import sglang_fields, sglang_logprob_fields, sglang_logprobs

_NAMES = {"max_tokens": "max_new_tokens", "seed": "sampling_seed", "min_tokens": "min_new_tokens"}
"""SGLang's names for the sampling fields whose OpenAI names its request decoder refuses."""


class SglangGenerate(Dialect):
    """SGLang ``POST /generate`` with ``input_ids``.

    Without a client limit ``max_new_tokens`` is sent as null, SGLang's "until the context
    ends" (its default is 128).  Streamed ``text`` is cumulative by default and a delta under
    ``--incremental-streaming-output``; each event says which (see ``event``)."""

    name = "sglang"

    def request(self, call: UpstreamCall) -> tuple[str, Body]:
        sampling = {"max_new_tokens": None} | call.sampling.named(**_NAMES) | call.format_fields()
        sampling |= sglang_fields(call.sampling)
        fields: dict[str, Any] = {"sampling_params": sampling, "stream": call.stream}
        fields |= sglang_logprob_fields(call.sampling)
        key = "text" if call.prompt.as_text else "input_ids"
        return "/generate", with_ids(fields, call.prompt, key)

    def event(self, payload: Any, prompt_tokens: int) -> Generated:
        answer = Answer(payload, "answer")
        meta = answer.object("meta_info")
        reason = matched = usage = None
        if meta.has("finish_reason"):
            finish = meta.object("finish_reason")
            kind = finish.optional_text("type")
            if kind == "abort":  # SGLang's way of failing a request
                raise UpstreamError(f"upstream aborted the request: {finish.raw('message')}")
            reason = "length" if kind == "length" else "stop"
            matched = stop_string(finish.raw("matched"))
            completion, cached = meta.count("completion_tokens"), meta.count("cached_tokens")
            usage = Usage(prompt_tokens, completion or 0, cached)
        return Generated(
            text=answer.text("text"),
            finish_reason=reason,
            usage=usage,
            stop_sequence=matched,
            cumulative=_cumulative(answer, meta),
            logprobs=sglang_logprobs(meta),
        )

    def tokenize_request(self, text: str, model: str) -> tuple[str, bytes]:
        body = {"model": model, "prompt": text, "add_special_tokens": False}
        return "/tokenize", orjson.dumps(body)

    def context_request(self, model: str) -> tuple[str, bytes | None]:
        """``/v1/models``: its ``max_model_len`` is the server's context; the one that
        ``/tokenize`` reports is the tokenizer's ``model_max_length``."""
        return "/v1/models", None

    def context_response(self, payload: Any, model: str) -> int | None:
        cards = Answer(payload, "models").objects("data")
        named = [c for c in cards if c.raw("id") == model] or cards[:1]
        return positive_int(named[0].raw("max_model_len")) if named else None


def _cumulative(answer: Answer, meta: Answer) -> bool:
    """Whether the event's text is all output so far: its ``output_ids`` are then all ids so
    far (``completion_tokens`` of them); under ``--incremental-streaming-output`` they are the
    new ones only.  The two readings agree on an event holding every id so far."""
    ids, count = answer.raw("output_ids"), meta.count("completion_tokens")
    return not (isinstance(ids, list) and count is not None and len(ids) < count)
