"""vLLM's three ways of taking token ids (launch flags: docs/upstreams.md)."""

from __future__ import annotations

from typing import Any

import orjson

from app.errors import UpstreamError
from app.generation import stop_string
from app.upstream.answers import Answer
from app.upstream.dialect import (
    Body,
    Generated,
    UpstreamCall,
    positive_int,
    usage_of,
    with_ids,
)
from app.upstream.llamacpp import OpenAICompletions
from app.upstream.output_fields import vllm_fields, vllm_generate_logprobs


class VllmCompletions(OpenAICompletions):
    """``POST /v1/completions`` with ``prompt: [ids]``: OpenAI completions, like llama.cpp's.
    vLLM's ``max_tokens`` defaults to 16 (null too): the limit is always sent."""

    name = "vllm-completions"

    def tokenize_request(self, text: str, model: str) -> tuple[str, bytes]:
        body = {"model": model, "prompt": text, "add_special_tokens": False}
        return "/tokenize", orjson.dumps(body)

    def context_request(self, model: str) -> tuple[str, bytes | None]:
        return self.tokenize_request("", model)

    def context_response(self, payload: Any, model: str) -> int | None:
        return positive_int(payload.get("max_model_len"))


class VllmChat(VllmCompletions):
    """``POST /v1/chat/completions`` with the ids in ``kv_transfer_params.prompt_token_ids``.

    vLLM keeps its own tool-call and reasoning parsing, so its chat chunks pass through.
    """

    name = "vllm-chat"
    chat_native = True

    def request(self, call: UpstreamCall) -> tuple[str, Body]:
        fields = dict(call.chat_body or {})
        fields["model"] = call.model
        if call.prompt.as_text:
            return "/v1/chat/completions", Body((orjson.dumps(fields),))
        return "/v1/chat/completions", with_ids(
            fields, call.prompt, "kv_transfer_params", "prompt_token_ids"
        )

    def event(self, payload: Any, prompt_tokens: int) -> Generated:
        raise NotImplementedError("vLLM chat replies are passed through (``chat_answer``)")


class VllmGenerate(VllmCompletions):
    """``POST /inference/v1/generate``: token ids in, token ids out (detokenized by us).

    The ids keep the token that completed a stop string; the caller trims the text there."""

    name = "vllm-generate"
    tokens_out = True

    def request(self, call: UpstreamCall) -> tuple[str, Body]:
        if call.prompt.as_text:
            raise UpstreamError(
                "the upstream tokenizes differently (alignment check) and vLLM's generate "
                "API takes token ids only; use the vllm-completions dialect"
            )
        fields: dict[str, Any] = {
            "model": call.model,
            "stream": call.stream,
            "sampling_params": call.sampling_fields()
            | call.format_fields(detokenized=False)
            | vllm_fields(call.sampling),
        }
        if call.stream:  # usage comes in a last chunk with ``choices: []``
            fields["stream_options"] = {"include_usage": True}
        return "/inference/v1/generate", with_ids(fields, call.prompt, "token_ids")

    def event(self, payload: Any, prompt_tokens: int) -> Generated:
        answer = Answer(payload, "completion")
        choice = answer.first("choices")
        return Generated(
            token_ids=choice.ids("token_ids"),
            logprobs=vllm_generate_logprobs(choice),
            finish_reason=choice.finish_reason(),
            usage=usage_of(answer, prompt_tokens),
            stop_sequence=stop_string(choice.raw("stop_reason")),
        )
