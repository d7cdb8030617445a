"""llama.cpp's server: ``/v1/completions`` (OpenAI form) or ``/completion`` (native form),
both taking ``prompt`` as a list of token ids."""

from __future__ import annotations

from typing import Any

import orjson

from app.upstream.dialect import Dialect, Generated, UpstreamCall, Usage, usage_of, with_ids


class LlamaCppCompletions(Dialect):
    """``POST /v1/completions`` with ``prompt: [ids]``; usage carries ``cached_tokens``."""

    name = "llamacpp"

    def request(self, call: UpstreamCall) -> tuple[str, bytes]:
        fields: dict[str, Any] = {"model": call.model, "stream": call.stream}
        fields |= call.sampling.openai_fields()
        if call.stream:
            fields["stream_options"] = {"include_usage": True}
        return "/v1/completions", with_ids(fields, call.prompt, "prompt")

    def event(self, payload: dict[str, Any], prompt_tokens: int) -> Generated:
        choices = payload.get("choices") or [{}]
        choice = choices[0]
        return Generated(
            text=choice.get("text") or "",
            finish_reason=choice.get("finish_reason"),
            usage=usage_of(payload, prompt_tokens),
        )

    def tokenize_request(self, text: str, model: str) -> tuple[str, bytes]:
        body = {"content": text, "add_special": False, "parse_special": True}
        return "/tokenize", orjson.dumps(body)


class LlamaCppNative(LlamaCppCompletions):
    """``POST /completion`` (llama.cpp's own API): ``n_predict``, ``content`` pieces."""

    name = "llamacpp-completion"

    def request(self, call: UpstreamCall) -> tuple[str, bytes]:
        fields: dict[str, Any] = {"stream": call.stream, "cache_prompt": True}
        fields |= call.sampling.named(max_tokens="n_predict")
        return "/completion", with_ids(fields, call.prompt, "prompt")

    def event(self, payload: dict[str, Any], prompt_tokens: int) -> Generated:
        finished = bool(payload.get("stop"))
        usage = None
        reason = None
        if finished:
            timings = payload.get("timings") or {}
            usage = Usage(
                prompt_tokens, int(payload.get("tokens_predicted") or 0), timings.get("cache_n")
            )
            reason = "length" if payload.get("stop_type") == "limit" else "stop"
        return Generated(text=payload.get("content") or "", finish_reason=reason, usage=usage)
