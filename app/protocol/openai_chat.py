"""OpenAI chat completions: the request as the proxy needs it, and the reply shapes.

Validation is hand-written rather than a pydantic model over the messages: a 1M-character
transcript is ~900 messages and building a model object for each costs milliseconds on every
call.  The checks are the ones that matter for rendering (roles, content types, tool-call
shape) and each error names the offending field (``messages[3].content``).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from app.errors import BadRequestError
from app.generation import Sampling
from app.protocol.billing_line import strip_messages
from app.protocol.chat_fields import PASSED_THROUGH, checked_fields
from app.protocol.output_options import logprobs_asked, output_format

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_SAMPLING_FLOATS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    stream: bool
    include_usage: bool
    sampling: Sampling
    template_kwargs: dict[str, Any]
    add_generation_prompt: bool
    body: dict[str, Any]
    """The request as sent, for upstreams that take the chat request itself."""
    continue_final_message: bool = False
    """The last (assistant) message is left open for the model to continue (vLLM's field)."""
    ignored_fields: tuple[str, ...] = ()
    """Harmless fields the client set that nothing reads (``chat_fields``): counted."""


def parse_chat_request(
    body: Any,
    *,
    validated: int = 0,
    format_param: str = "response_format",
    strip_billing_line: bool = False,
) -> ChatRequest:
    """Check a decoded chat completions body; raises ``BadRequestError`` naming the field.
    The first ``validated`` messages were checked before (the same objects, see
    ``incremental_json``).  ``format_param``: the client's field that the body's
    ``response_format`` came from (a translated body's), named where a dialect refuses it.
    ``strip_billing_line``: the system messages lose Claude Code's billing line as vLLM's chat
    parsing takes it off (``billing_line``); ``body`` is kept as sent."""
    if not isinstance(body, dict):
        raise BadRequestError("the request body must be a JSON object")
    ignored = checked_fields(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequestError("'model' is required and must be a string", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequestError("'messages' must be a non-empty array", param="messages")
    for index in range(validated, len(messages)):
        _check_message(index, messages[index])
    tools = body.get("tools")
    if tools is not None:
        _check_tools(tools)
    if body.get("n", 1) != 1:
        raise BadRequestError("only n=1 is supported", param="n")
    stream = _typed(body, "stream", bool, False)
    options = _typed(body, "stream_options", dict, {})
    kwargs = _reasoning_effort(body, _typed(body, "chat_template_kwargs", dict, {}))
    generation_prompt = _typed(body, "add_generation_prompt", bool, True)
    continued = _typed(body, "continue_final_message", bool, False)
    if continued and generation_prompt:
        raise BadRequestError(
            "'continue_final_message' needs 'add_generation_prompt': false (the last message "
            "is continued, no new turn is opened)",
            param="continue_final_message",
        )
    return ChatRequest(
        model=model,
        messages=strip_messages(messages) if strip_billing_line else messages,
        tools=tools or None,
        stream=stream,
        include_usage=bool(options.get("include_usage")),
        sampling=_sampling(body, format_param),
        template_kwargs=kwargs,
        add_generation_prompt=generation_prompt,
        body=body,
        continue_final_message=continued,
        ignored_fields=ignored,
    )


def _reasoning_effort(body: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The template kwargs with ``reasoning_effort`` bound as vLLM binds it: the effort
    itself, and ``enable_thinking`` (on unless "none") where the client's kwargs do not set
    it."""
    effort = body.get("reasoning_effort")
    if effort is None:
        return kwargs
    if not isinstance(effort, str):
        raise BadRequestError("'reasoning_effort' must be a string", param="reasoning_effort")
    return {"enable_thinking": effort != "none", **kwargs, "reasoning_effort": effort}


def _check_message(index: int, message: Any) -> None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise BadRequestError(f"{where} must be an object", param=where)
    role = message.get("role")
    if role not in _ROLES:
        raise BadRequestError(f"{where}.role must be one of {sorted(_ROLES)}", param=where)
    content = message.get("content")
    if isinstance(content, list):
        for k, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise BadRequestError(
                    f"{where}.content[{k}] must be a typed content part", param=f"{where}.content"
                )
    elif content is not None and not isinstance(content, str):
        raise BadRequestError(
            f"{where}.content must be a string, an array or null", param=f"{where}.content"
        )
    calls = message.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list):
            raise BadRequestError(
                f"{where}.tool_calls must be an array on an assistant message",
                param=f"{where}.tool_calls",
            )
        for k, call in enumerate(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise BadRequestError(
                    f"{where}.tool_calls[{k}].function.name is required",
                    param=f"{where}.tool_calls",
                )


def _check_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise BadRequestError("'tools' must be an array", param="tools")
    for k, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise BadRequestError(f"tools[{k}].function.name is required", param="tools")


def _sampling(body: dict[str, Any], format_param: str) -> Sampling:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise BadRequestError("'max_tokens' must be a positive integer", param="max_tokens")
    floats = {}
    for name in _SAMPLING_FLOATS:
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise BadRequestError(f"'{name}' must be a number", param=name)
        floats[name] = None if value is None else float(value)
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop or []
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise BadRequestError("'stop' must be a string or an array of strings", param="stop")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequestError("'seed' must be an integer", param="seed")
    return Sampling(
        max_tokens=max_tokens,
        stop=stops,
        seed=seed,
        logit_bias=_typed(body, "logit_bias", dict, None),
        extra={k: body[k] for k in PASSED_THROUGH if body.get(k) is not None},
        output_format=output_format(body, format_param),
        logprobs=logprobs_asked(body),
        **floats,
    )


def _typed(body: dict[str, Any], name: str, kind: type, default: Any) -> Any:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise BadRequestError(f"'{name}' must be of type {kind.__name__}", param=name)
    return value


def completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex


def chat_completion(
    *,
    ident: str,
    model: str,
    message: dict[str, Any],
    finish_reason: str | None,
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
    }
    if usage is not None:
        reply["usage"] = usage
    return reply


def chat_chunk(
    *,
    ident: str,
    model: str,
    created: int,
    delta: dict[str, Any] | None,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``delta=None`` gives the usage-only final chunk."""
    chunk: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk
