"""Answers as vLLM 0.33.0 and SGLang 0.5.23 send them, written from their source (the files
of ``app.tools.assets.SERVER_SOURCES`` and the serving code next to them in the same wheels).

vLLM ``/v1/completions`` (``openai/completion/serving.py``): token chunks are dumped with
``exclude_unset`` (no ``usage`` key); the finish chunk carries ``finish_reason`` and
``stop_reason`` (the stop string, a stop token id, or null for EOS); usage comes in a last
chunk with ``choices: []`` only when ``stream_options.include_usage`` was asked for, with
``prompt_tokens_details`` only under ``--enable-prompt-tokens-details``.

vLLM ``/inference/v1/generate`` (``scale_out/token_in_token_out/serving.py``): token chunks
dump every field but ``prompt_token_ids``/``mm_placeholders``/``metrics`` (so ``usage`` is
null); ``token_ids`` are deltas, and the last keeps the token that completed a stop string.

SGLang ``/generate`` (``managers/tokenizer_manager.py``): each event is ``text``,
``output_ids`` and ``meta_info`` (``completion_tokens`` counts all ids so far;
``finish_reason`` is null or an object ``{"type": "stop" | "length" | "abort", ...}`` whose
``matched`` is the stop string or token id); by default ``text`` and ``output_ids`` repeat
everything so far, under ``--incremental-streaming-output`` they are the new part only.
"""

from __future__ import annotations

from typing import Any

CACHED = 3


def vllm_usage(prompt: int, completion: int, details: bool = True) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                             "completion_tokens": completion}
    if details:
        usage["prompt_tokens_details"] = {"cached_tokens": CACHED}
    return usage


def vllm_completion(text: str, prompt: int, stop_reason: int | str | None) -> dict[str, Any]:
    return {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop",
                         "stop_reason": stop_reason, "prompt_logprobs": None}],
            "usage": vllm_usage(prompt, 4), "system_fingerprint": None, "kv_transfer_params": None}


def vllm_completion_stream(pieces: list[str], prompt: int, stop_reason: int | str | None,
                           include_usage: bool) -> list[dict[str, Any]]:
    head = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m"}
    chunks = [head | {"choices": [{"index": 0, "text": p, "logprobs": None,
                                   "finish_reason": None, "stop_reason": None}]}
              for p in pieces]
    chunks[-1]["choices"][0] |= {"finish_reason": "stop", "stop_reason": stop_reason}
    if include_usage:
        chunks.append(head | {"choices": [], "usage": vllm_usage(prompt, len(pieces))})
    return chunks


def vllm_generate(ids: list[int], prompt: int, stop_reason: int | str | None) -> dict[str, Any]:
    return {"request_id": "r", "model": "m", "created": 1, "output_mode": "tokens",
            "usage": vllm_usage(prompt, len(ids)),
            "choices": [{"index": 0, "logprobs": None, "finish_reason": "stop",
                         "stop_reason": stop_reason, "token_ids": ids}]}


def vllm_generate_stream(ids: list[int], prompt: int,
                         stop_reason: int | str | None) -> list[dict[str, Any]]:
    chunks = [{"request_id": "r", "usage": None, "output_mode": "tokens",
               "choices": [{"index": 0, "logprobs": None, "finish_reason": None,
                            "stop_reason": None, "token_ids": [t], "routed_experts": None,
                            "sampling_mask": None, "weight_versions": None}]} for t in ids]
    chunks[-1]["choices"][0] |= {"finish_reason": "stop", "stop_reason": stop_reason}
    chunks.append({"request_id": "r", "output_mode": "tokens", "choices": [],
                   "usage": vllm_usage(prompt, len(ids))})
    return chunks


def sglang_meta(prompt: int, completion: int, finish: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": "rid", "finish_reason": finish, "prompt_tokens": prompt,
            "completion_tokens": completion, "cached_tokens": CACHED, "weight_version": "default",
            "e2e_latency": 0.01}


def sglang_stream(pieces: list[str], ids: list[int], prompt: int, finish: dict[str, Any],
                  *, incremental: bool) -> list[dict[str, Any]]:
    """One event per piece (``ids[k]`` its id); the last carries ``finish``."""
    events = []
    for k, piece in enumerate(pieces):
        last = k == len(pieces) - 1
        text = piece if incremental else "".join(pieces[: k + 1])
        out_ids = [ids[k]] if incremental else ids[: k + 1]
        events.append({"text": text, "output_ids": out_ids,
                       "meta_info": sglang_meta(prompt, k + 1, finish if last else None)})
    return events


def sglang_answer(pieces: list[str], ids: list[int], prompt: int,
                  finish: dict[str, Any]) -> dict[str, Any]:
    return {"text": "".join(pieces), "output_ids": ids,
            "meta_info": sglang_meta(prompt, len(ids), finish)}


def vllm_tokenize(context: int) -> dict[str, Any]:
    """vLLM's ``/tokenize`` (``serve/tokenize/serving.py``): the model's ``max_model_len``."""
    return {"count": 0, "max_model_len": context, "tokens": [], "token_strs": None}


def sglang_models(context: int) -> dict[str, Any]:
    """SGLang's ``/v1/models`` (``entrypoints/http_server.py``): ``max_model_len`` is
    ``model_config.context_len``."""
    return {"object": "list", "data": [
        {"id": "m", "object": "model", "created": 1, "owned_by": "sglang", "root": "m",
         "parent": None, "max_model_len": context}]}
