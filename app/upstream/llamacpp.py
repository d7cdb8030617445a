"""llama.cpp's server: ``/v1/completions`` (OpenAI form) or ``/completion`` (native form),
both taking ``prompt`` as a list of token ids."""

from __future__ import annotations

from typing import Any

import orjson

from app.generation import Usage, stop_string
from app.upstream.answers import Answer
from app.upstream.dialect import (
    Body,
    Dialect,
    Generated,
    UpstreamCall,
    positive_int,
    usage_of,
    with_ids,
)
from app.upstream.output_fields import (
    llamacpp_fields,
    llamacpp_logprobs,
    vllm_completion_logprobs,
    vllm_fields,
)


class OpenAICompletions(Dialect):
    """``POST /v1/completions`` with ``prompt: [ids]``; usage carries ``cached_tokens``; a
    string ``stop_reason`` (vLLM's) names the stop sequence that ended the text."""

    def request(self, call: UpstreamCall) -> tuple[str, Body]:
        fields: dict[str, Any] = {"model": call.model, "stream": call.stream}
        fields |= call.sampling_fields()
        fields |= self.format_fields(call)
        fields |= self.output_fields(call)
        if call.stream:
            fields["stream_options"] = {"include_usage": True}
        return "/v1/completions", with_ids(fields, call.prompt, "prompt")

    def format_fields(self, call: UpstreamCall) -> dict[str, Any]:
        """What the server is asked for so that the tool format can be read (vLLM's names)."""
        return call.format_fields()

    def output_fields(self, call: UpstreamCall) -> dict[str, Any]:
        """The client's output format and log probabilities (vLLM's names)."""
        return vllm_fields(call.sampling)

    def event(self, payload: Any, prompt_tokens: int) -> Generated:
        answer = Answer(payload, "completion")
        choice = answer.first("choices")
        return Generated(
            text=choice.text("text"),
            finish_reason=choice.finish_reason(),
            usage=usage_of(answer, prompt_tokens),
            stop_sequence=stop_string(choice.raw("stop_reason")),
            logprobs=vllm_completion_logprobs(choice),
        )


class LlamaCppCompletions(OpenAICompletions):
    """llama.cpp's ``/v1/completions``.  Calls with stop sequences go to ``/completion``:
    only llama.cpp's own API says which one ended the text (Anthropic's ``stop_sequence``);
    so do calls asking for log probabilities, in the form its own API answers them."""

    name = "llamacpp"

    def request(self, call: UpstreamCall) -> tuple[str, Body]:
        native = call.sampling.stop or call.sampling.logprobs is not None
        return _native_request(call) if native else super().request(call)

    def format_fields(self, call: UpstreamCall) -> dict[str, Any]:
        return _preserved(call)

    def output_fields(self, call: UpstreamCall) -> dict[str, Any]:
        return llamacpp_fields(call.sampling)

    def event(self, payload: Any, prompt_tokens: int) -> Generated:
        if isinstance(payload, dict) and "choices" not in payload:
            return _native_event(payload, prompt_tokens)
        return super().event(payload, prompt_tokens)

    def tokenize_request(self, text: str, model: str) -> tuple[str, bytes]:
        body = {"content": text, "add_special": False, "parse_special": True}
        return "/tokenize", orjson.dumps(body)

    def context_request(self, model: str) -> tuple[str, bytes | None]:
        return "/props", None

    def context_response(self, payload: Any, model: str) -> int | None:
        """A slot's context (``--ctx-size`` divided among ``--parallel`` slots): one request
        has that much, not the total."""
        settings = Answer(payload, "props").object("default_generation_settings")
        return positive_int(settings.raw("n_ctx"))


class LlamaCppNative(LlamaCppCompletions):
    """``POST /completion`` (llama.cpp's own API): ``n_predict``, ``content`` pieces."""

    name = "llamacpp-completion"

    def request(self, call: UpstreamCall) -> tuple[str, Body]:
        return _native_request(call)

    def event(self, payload: Any, prompt_tokens: int) -> Generated:
        return _native_event(payload, prompt_tokens)


def _native_request(call: UpstreamCall) -> tuple[str, Body]:
    fields: dict[str, Any] = {"stream": call.stream, "cache_prompt": True}
    fields |= call.sampling_fields(max_tokens="n_predict")
    fields |= _preserved(call)
    fields |= llamacpp_fields(call.sampling)
    return "/completion", with_ids(fields, call.prompt, "prompt")


def _preserved(call: UpstreamCall) -> dict[str, Any]:
    """llama.cpp writes a special token into the text only when the request lists it in
    ``preserved_tokens``.  It has no stop-token field: it stops at the tokens the GGUF marks
    as ending a generation (for gpt-oss, ``<|call|>`` and ``<|return|>`` too)."""
    return {"preserved_tokens": list(call.special_tokens)} if call.special_tokens else {}


def _native_event(payload: Any, prompt_tokens: int) -> Generated:
    answer = Answer(payload, "completion")
    text = answer.text("content")
    logprobs = llamacpp_logprobs(answer)
    if not answer.flag("stop"):
        return Generated(text=text, logprobs=logprobs)
    cached = answer.object("timings").count("cache_n")
    usage = Usage(prompt_tokens, answer.count("tokens_predicted") or 0, cached)
    kind = answer.optional_text("stop_type")
    return Generated(
        text=text,
        finish_reason="length" if kind == "limit" else "stop",
        usage=usage,
        stop_sequence=stop_string(answer.raw("stopping_word")) if kind == "word" else None,
        logprobs=logprobs,
    )
