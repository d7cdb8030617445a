"""The terms a generation is asked for and reported in, shared by the client protocols (which
read them from requests and write them into replies) and the upstream dialects (which send and
receive them): neither side owns them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ToolFormat = Literal[
    "hermes",
    "qwen3_coder",
    "glm45",
    "glm47",
    "kimi_k2",
    "deepseek_v31",
    "deepseek_v32",
    "harmony",
    "minimax_m2",
    "mistral",
    "llama3_json",
    "pythonic",
    "gemma4",
    "seed_oss",
]
"""How the model writes tool calls (and its reasoning) in its text; one module each in
``app.protocol.output``, listed with their markers in docs/serving.md. Names follow vLLM's tool
parsers where one exists: ``harmony`` is gpt-oss's (vLLM's ``openai``), ``deepseek_v32`` reads
DeepSeek V4's DSML too (vLLM's ``deepseek_v4``), ``pythonic`` is Llama 4's and Gemma 3's."""


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """A constraint on the output's text, in the client's terms: ``json`` (``value``: a JSON
    schema, or None for any JSON object), ``regex`` (a pattern), ``choice`` (a list of
    strings) or ``grammar`` (the grammar text, in the upstream's own grammar language).
    ``param`` is the client's field that asked for it, named when a dialect cannot carry it."""

    kind: Literal["json", "regex", "choice", "grammar"]
    value: Any
    param: str


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling parameters in OpenAI terms; None means "the upstream's default"."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Upstream-specific fields passed through as given (``top_k``, ``min_p``, ...)."""
    output_format: OutputFormat | None = None
    logprobs: int | None = None
    """Log probabilities asked for: None, none; ``k``, each output token's with its ``k``
    likeliest alternatives.  Like ``output_format``, each dialect sends it under its
    server's own fields (never in ``openai_fields``)."""

    def openai_fields(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": self.stop or None,
            "seed": self.seed,
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
            "logit_bias": self.logit_bias,
        }
        return {k: v for k, v in values.items() if v is not None} | self.extra

    def named(self, **names: str) -> dict[str, Any]:
        """``openai_fields`` under an upstream's own names (``max_tokens="n_predict"``)."""
        return {names.get(k, k): v for k, v in self.openai_fields().items()}


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One output token's log probability as an upstream reports it: its text, its bytes,
    and (for a chosen token) the likeliest alternatives at its position, likeliest first.
    A tokens-out upstream reports only the ``token_id``: its text is ours to spell."""

    token: str
    logprob: float
    bytes: bytes
    top: tuple[TokenLogprob, ...] = ()
    token_id: int | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None

    def to_openai(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return usage


def stop_string(value: Any) -> str | None:
    """An upstream's report of the stop sequence that ended the output: a non-empty string,
    or None (vLLM reports a stop token id there, llama.cpp an empty string)."""
    return value if isinstance(value, str) and value else None
