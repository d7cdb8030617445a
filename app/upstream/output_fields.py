"""The output's form on each server: the client's format and log probabilities asked for under
the server's own fields, and the log probabilities read back from its answers.

| server | format | log probabilities |
|---|---|---|
| vLLM (completions, generate) | ``structured_outputs``: json, json_object, regex, choice, grammar | ``logprobs`` (top k) |
| SGLang ``/generate`` | ``sampling_params``: json_schema (text), regex, ebnf, choice | ``return_logprob``, ``top_logprobs_num`` |
| llama.cpp | ``json_schema``, ``grammar`` (GBNF); regex and choice refused | ``n_probs`` (its own API) |

vLLM chat takes the client's own fields (``response_format``, ``logprobs`` ...), forwarded as
the client sent them.  What a server cannot carry is a 400 naming the client's field
(``BadRequestError``), before anything is sent.
"""  # noqa: E501

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson

from app.errors import BadRequestError, UpstreamMalformedError
from app.generation import Sampling, TokenLogprob
from app.upstream.answers import Answer

_NO_LOGPROB = -9999.0
"""What vLLM's chat API reports for a token without a log probability."""
ANY_OBJECT: dict[str, Any] = {"type": "object"}
"""The schema of ``json_object``: any JSON object."""


def vllm_fields(sampling: Sampling) -> dict[str, Any]:
    """vLLM's ``structured_outputs`` and ``logprobs`` fields."""
    fields: dict[str, Any] = {}
    fmt = sampling.output_format
    if fmt is not None:
        key = "json_object" if fmt.kind == "json" and fmt.value is None else fmt.kind
        fields["structured_outputs"] = {key: True if key == "json_object" else fmt.value}
    if sampling.logprobs is not None:
        fields["logprobs"] = sampling.logprobs
    return fields


def sglang_logprob_fields(sampling: Sampling) -> dict[str, Any]:
    """SGLang's request fields for log probabilities: the output's only (``logprob_start_len``
    -1, none of the prompt's), each token's text with it."""
    if sampling.logprobs is None:
        return {}
    return {
        "return_logprob": True,
        "top_logprobs_num": sampling.logprobs,
        "logprob_start_len": -1,
        "return_text_in_logprobs": True,
    }


def sglang_fields(sampling: Sampling) -> dict[str, Any]:
    """SGLang's ``sampling_params`` constraint: ``json_schema`` is the schema's JSON text."""
    fmt = sampling.output_format
    if fmt is None:
        return {}
    if fmt.kind == "json":
        return {"json_schema": orjson.dumps(fmt.value or ANY_OBJECT).decode()}
    return {"ebnf" if fmt.kind == "grammar" else fmt.kind: fmt.value}


def llamacpp_fields(sampling: Sampling) -> dict[str, Any]:
    """llama.cpp's ``json_schema`` or ``grammar`` (GBNF), and ``n_probs`` (at least 1: 0 asks
    for none, where the client wants the chosen token's at least)."""
    fields: dict[str, Any] = {}
    fmt = sampling.output_format
    if fmt is not None:
        if fmt.kind in ("regex", "choice"):
            raise _cannot(fmt.param, "llama.cpp (it takes a JSON schema or a GBNF grammar)")
        key = "json_schema" if fmt.kind == "json" else "grammar"
        fields[key] = (fmt.value or ANY_OBJECT) if fmt.kind == "json" else fmt.value
    if sampling.logprobs is not None:
        fields["n_probs"] = max(sampling.logprobs, 1)
    return fields


def _cannot(param: str, where: str) -> BadRequestError:
    return BadRequestError(f"'{param}' cannot be carried to {where}", param=param)


def llamacpp_logprobs(answer: Answer) -> tuple[TokenLogprob, ...]:
    """llama.cpp's ``completion_probabilities``: per token its text, bytes and log
    probability, with its ``top_logprobs`` alike."""
    return tuple(_llamacpp_token(entry) for entry in answer.objects("completion_probabilities"))


def _llamacpp_token(entry: Answer) -> TokenLogprob:
    alternatives = tuple(_llamacpp_token(t) for t in entry.objects("top_logprobs"))
    data = entry.raw("bytes")
    token = entry.text("token")
    if data is not None and not (
        isinstance(data, list) and all(isinstance(b, int) and 0 <= b < 256 for b in data)
    ):
        raise UpstreamMalformedError(f"completion_probabilities: bytes {data!r} are not bytes")
    raw = bytes(data) if data is not None else token.encode()
    return TokenLogprob(token, _number(entry.raw("logprob")), raw, alternatives)


def vllm_completion_logprobs(choice: Answer) -> tuple[TokenLogprob, ...]:
    """vLLM's completions ``logprobs``: ``tokens`` with ``token_logprobs`` and per token a
    ``top_logprobs`` object {token: log probability}, here likeliest first."""
    logprobs = choice.object("logprobs")
    tokens, values = logprobs.raw("tokens") or [], logprobs.raw("token_logprobs") or []
    tops = logprobs.raw("top_logprobs") or [None] * len(tokens)
    if not (isinstance(tokens, list) and isinstance(values, list) and isinstance(tops, list)):
        raise UpstreamMalformedError("completion.choices[0].logprobs: lists expected")
    if not len(tokens) == len(values) == len(tops):
        raise UpstreamMalformedError("completion.choices[0].logprobs: lists of unequal length")
    out = []
    for token, value, options in zip(tokens, values, tops, strict=True):
        if not isinstance(token, str) or not isinstance(options, dict | None):
            raise UpstreamMalformedError("completion.choices[0].logprobs: a malformed token")
        ranked = sorted((options or {}).items(), key=lambda item: -_number(item[1]))
        alternatives = tuple(TokenLogprob(t, _number(v), t.encode(), ()) for t, v in ranked)
        logprob = _NO_LOGPROB if value is None else _number(value)
        out.append(TokenLogprob(token, logprob, token.encode(), alternatives))
    return tuple(out)


def vllm_generate_logprobs(choice: Answer) -> tuple[TokenLogprob, ...]:
    """vLLM generate's ``logprobs.content``: token ids with their log probability; each
    one's ``top_logprobs`` (the sampled token first, then the candidates) here ranked,
    likeliest first, each token once."""
    out = []
    for entry in choice.object("logprobs").objects("content"):
        candidates = sorted(
            (_generate_token(c) for c in entry.objects("top_logprobs")),
            key=lambda pair: pair[0],
        )
        seen: set[int | None] = set()
        ranked = []
        for _, candidate in candidates:
            if candidate.token_id not in seen:
                seen.add(candidate.token_id)
                ranked.append(candidate)
        _, chosen = _generate_token(entry)
        out.append(TokenLogprob("", chosen.logprob, b"", tuple(ranked), chosen.token_id))
    return tuple(out)


def _generate_token(entry: Answer) -> tuple[float, TokenLogprob]:
    """(rank order, token) of one generate candidate; no rank: by log probability."""
    token_id = _token_id(entry.raw("token_id"))
    logprob = _number(entry.raw("logprob"))
    rank = entry.count("rank")
    return (float(rank) if rank is not None else -logprob), TokenLogprob(
        "", logprob, b"", (), token_id
    )


def sglang_logprobs(meta: Answer) -> tuple[TokenLogprob, ...]:
    """SGLang's ``meta_info.output_token_logprobs`` ([log probability, token id, text] per
    token) with ``output_top_logprobs`` (a list of such per token, or null); a token without
    its text is spelled by us from its id."""
    entries = meta.raw("output_token_logprobs") or []
    tops = meta.raw("output_top_logprobs") or []
    if not isinstance(entries, list) or not isinstance(tops, list):
        raise UpstreamMalformedError("meta_info: output logprobs are not lists")
    out = []
    for k, entry in enumerate(entries):
        alternatives = tops[k] if k < len(tops) and tops[k] is not None else []
        if not isinstance(alternatives, list):
            raise UpstreamMalformedError("meta_info.output_top_logprobs: not a list")
        top = tuple(_sglang_token(a) for a in alternatives)
        out.append(replace(_sglang_token(entry), top=top))
    return tuple(out)


def _sglang_token(entry: Any) -> TokenLogprob:
    if not (isinstance(entry, list) and len(entry) == 3):
        raise UpstreamMalformedError(f"a SGLang log probability entry {entry!r} is malformed")
    value, token_id, text = entry
    logprob = _NO_LOGPROB if value is None else _number(value)
    if text is None:
        return TokenLogprob("", logprob, b"", (), _token_id(token_id))
    if not isinstance(text, str):
        raise UpstreamMalformedError(f"a SGLang log probability's text {text!r} is not text")
    return TokenLogprob(text, logprob, text.encode(), ())


def _token_id(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise UpstreamMalformedError(f"a log probability's token_id {value!r} is not a token id")


def _number(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise UpstreamMalformedError(f"a log probability {value!r} is not a number")
