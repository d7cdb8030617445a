"""SGLang's native ``/generate`` API with ``input_ids``."""

from __future__ import annotations

from typing import Any

import orjson

from app.errors import UpstreamError
from app.upstream.dialect import Dialect, Generated, UpstreamCall, Usage, stop_string, with_ids


class SglangGenerate(Dialect):
    """SGLang ``POST /generate`` with ``input_ids``; streamed ``text`` is cumulative."""

    name = "sglang"
    cumulative_text = True

    def request(self, call: UpstreamCall) -> tuple[str, bytes]:
        sampling = call.sampling.named(max_tokens="max_new_tokens", seed="sampling_seed")
        fields: dict[str, Any] = {"sampling_params": sampling, "stream": call.stream}
        key = "text" if call.prompt.as_text else "input_ids"
        return "/generate", with_ids(fields, call.prompt, key)

    def event(self, payload: dict[str, Any], prompt_tokens: int) -> Generated:
        meta = payload.get("meta_info") or {}
        finish = meta.get("finish_reason")
        reason = matched = None
        if isinstance(finish, dict):
            if finish.get("type") == "abort":  # SGLang's way of failing a request
                raise UpstreamError(f"upstream aborted the request: {finish.get('message')}")
            reason = "length" if finish.get("type") == "length" else "stop"
            matched = stop_string(finish.get("matched"))
        usage = None
        if reason is not None:
            usage = Usage(
                prompt_tokens, int(meta.get("completion_tokens") or 0), meta.get("cached_tokens")
            )
        return Generated(
            text=payload.get("text") or "", finish_reason=reason, usage=usage, stop_sequence=matched
        )

    def tokenize_request(self, text: str, model: str) -> tuple[str, bytes]:
        body = {"model": model, "prompt": text, "add_special_tokens": False}
        return "/tokenize", orjson.dumps(body)
