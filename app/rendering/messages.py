"""Request messages -> the dicts a chat template sees, as vLLM + transformers build them.

vLLM (``parse_chat_messages``) rebuilds each message from the request: the content becomes
one string (text parts joined with ``"\\n"``) for "string"-format templates or a list of
``{"type": "text", "text": ...}`` parts for "openai"-format ones; assistant messages keep
``tool_calls`` and their reasoning (under ``reasoning`` and ``reasoning_content``), tool
messages their ``tool_call_id``; then assistant ``tool_calls[].function.arguments`` JSON
strings become objects and empty ``tool_calls`` lists are dropped. transformers
(``apply_chat_template``) then drops ``None``-valued keys and aliases reasoning under
``thinking`` and ``reasoning_content``.

Arguments that are not a JSON object (none, an empty or blank string, ``[]``, ``42``) become
``{}`` as there, and a tool call whose ``type`` is not ``"function"`` is a 400 as there.

Departures, on purpose: arguments that are not valid JSON are a 400 naming the message
(vLLM silently renders ``{}``), and any non-text part (image, audio, video, embeddings) is a
400: the proxy sends token ids, so it serves text-only models.

Tools reach the template as vLLM's request model dumps them (``prepare_tools``): each function
tool as ``{"type", "function": {"name", "description", "parameters"[, "strict"]
[, "defer_loading"]}[, "defer_loading"]}``, in that order, ``description`` and ``parameters``
``None`` when absent, other keys dropped; so a tool renders the same whatever order or API
it came in.

A template's content format (``content_format``) is "openai" when it loops over a message's
``content``, else "string".

Roles (``as_vllm_roles``): a template whose text never names the ``developer`` role (quoted)
gets each ``developer`` message as a ``system`` one (its ``tools`` key dropped), and then, when a
system message is not first or there are several, all of them merged into one first system
message: their texts (parts' texts joined with ``"\n"``), the empty ones left out, joined with
blank lines, as a plain string in both formats. Other messages keep their order. A template that
names the role gets the messages as they are. This is vLLM's ``safe_apply_chat_template``, run
for every client API (the Responses translation keeps ``developer`` items as ``developer``).
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from app.errors import BadRequestError
from app.rendering.content_format import ContentFormat

# Part type -> the key holding its text (vLLM's text-like parts).
_TEXT_PARTS = {
    "text": "text",
    "input_text": "text",
    "output_text": "text",
    "refusal": "refusal",
    "thinking": "thinking",
}
_SKIP_IF_NONE = frozenset({"text", "refusal"})
_MEDIA_KEYS = (
    "image_url",
    "image_pil",
    "image_embeds",
    "audio_embeds",
    "prompt_embeds",
    "audio_url",
    "input_audio",
    "video_url",
)
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def prepare_messages(
    messages: Sequence[Mapping[str, Any]], content_format: ContentFormat
) -> list[dict[str, Any]]:
    """The template's view of request messages (see the module docstring).

    Never mutates ``messages``. Raises ``BadRequestError`` naming the offending field.
    """
    if not messages:
        raise BadRequestError("messages must not be empty", param="messages")
    return [prepare_message(i, m, content_format) for i, m in enumerate(messages)]


@functools.lru_cache(maxsize=64)
def takes_developer(source: str) -> bool:
    """Whether template text ``source`` names the ``developer`` role (as vLLM tests it)."""
    return '"developer"' in source or "'developer'" in source


_ROLE = operator.itemgetter("role")


def as_vllm_roles(prepared: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    """Prepared messages with their roles as vLLM hands them to template ``source`` (see the
    module docstring): ``prepared`` itself when nothing changes, else a new list (holding
    ``prepared``'s dicts of the messages left as they are)."""
    if takes_developer(source) or "developer" not in map(_ROLE, prepared):
        return prepared
    messages = [_as_system(m) if m["role"] == "developer" else m for m in prepared]
    systems = [m for m in messages if m["role"] == "system"]
    if messages[0]["role"] == "system" and len(systems) == 1:
        return messages
    texts = [text for m in systems if (text := _system_text(m["content"]))]
    merged = {"role": "system", "content": "\n\n".join(texts)}
    return [merged, *(m for m in messages if m["role"] != "system")]


def _as_system(message: dict[str, Any]) -> dict[str, Any]:
    out = {**message, "role": "system"}
    out.pop("tools", None)
    return out


def _system_text(content: str | Parts) -> str:
    return (
        content
        if isinstance(content, str)
        else "\n".join(p["text"] for p in content if "text" in p)
    )


def prepare_tools(tools: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The template's view of request ``tools`` (see the module docstring); a tool that is not
    a JSON object with a ``function`` object is passed as it is."""
    return [_tool(tool) for tool in tools]


_TOOL_KEYS = ("type", "function")
_FUNCTION_KEYS = ("name", "description", "parameters")


def _tool(tool: Any) -> Any:
    if not isinstance(tool, dict) or not isinstance(function := tool.get("function"), dict):
        return tool
    if tuple(tool) == _TOOL_KEYS and tuple(function) == _FUNCTION_KEYS:
        return tool  # already as vLLM dumps it (an OpenAI client's usual tool)
    view = {
        "name": function.get("name"),
        "description": function.get("description"),
        "parameters": function.get("parameters"),
    }
    outer_defer, inner_defer = tool.get("defer_loading"), function.get("defer_loading")
    for key, value in (
        ("strict", function.get("strict")),
        ("defer_loading", outer_defer if inner_defer is None else inner_defer),
    ):
        if value is not None:
            view[key] = value
    out = {"type": tool.get("type", "function"), "function": view}
    if outer_defer is not None:
        out["defer_loading"] = outer_defer
    return out


def prepare_message(index: int, message: Mapping[str, Any], fmt: ContentFormat) -> dict[str, Any]:
    """The template's view of ``messages[index]``."""
    where = f"messages[{index}]"
    if not isinstance(message, Mapping):
        raise BadRequestError(f"{where} must be an object", param=where)
    role = message.get("role")
    if not isinstance(role, str):
        raise BadRequestError(f"{where}.role must be a string", param=f"{where}.role")
    out: dict[str, Any] = {"role": role, "content": _content(where, message.get("content"), fmt)}
    if role == "assistant":
        tool_calls = message.get("tool_calls")
        if tool_calls is not None:
            if not isinstance(tool_calls, list):
                raise BadRequestError(f"{where}.tool_calls must be a list", param=where)
            if tool_calls:
                out["tool_calls"] = [
                    _tool_call(f"{where}.tool_calls[{j}]", c) for j, c in enumerate(tool_calls)
                ]
        reasoning = message.get("reasoning")
        if reasoning is None:
            reasoning = message.get("reasoning_content")
        if reasoning is not None:
            out["reasoning"] = out["reasoning_content"] = reasoning
    elif role == "tool":
        if "tool_call_id" in message:
            out["tool_call_id"] = message["tool_call_id"]
        content = out["content"]
        if isinstance(content, list) and all(p.get("type") == "text" for p in content):
            out["content"] = "\n".join(p.get("text", "") for p in content)
    for key in ("name", "task"):
        if isinstance(message.get(key), str):
            out[key] = message[key]
    if role == "developer":
        out["tools"] = message.get("tools")
    # transformers: drop None-valued keys, then alias the reasoning fields.
    out = {k: v for k, v in out.items() if v is not None}
    found = next((out[k] for k in _REASONING_FIELDS if out.get(k) is not None), None)
    if found is not None:
        out = {"thinking": found, **out, "reasoning_content": found}
    return out


class Parts(list[dict[str, Any]]):
    """A message's content as parts (the "openai" format), printed as its text.

    A template that also prints a content it loops over as it is (``{{ m.content }}``,
    ``| trim``, ``~``) would print a plain list's Python repr into the prompt, as vLLM does;
    these parts print what the "string" format gives (their texts joined). Everything else a
    template does with them (loops, tests, ``tojson``, indexing) sees a list of parts."""

    __slots__ = ("_text",)  # private: a template reading ``content.text`` finds nothing

    def __init__(self, items: list[dict[str, Any]], text: str) -> None:
        super().__init__(items)
        self._text = text

    def __str__(self) -> str:
        return self._text


PARTS_OBJECT = f"{Parts.__module__}.{Parts.__qualname__} object"
"""How jinja's errors name ``Parts`` ("... object has no element 0"): the renderer's errors
say "list object" instead, as transformers' do (vLLM hands it a plain list)."""


def _content(where: str, content: Any, fmt: ContentFormat) -> str | Parts:
    if content is None:
        parts: Sequence[Any] = ()
    elif isinstance(content, str):
        parts = (content,)
    elif isinstance(content, list):
        parts = content
    else:
        raise BadRequestError(
            f"{where}.content must be a string or a list of parts", param=f"{where}.content"
        )
    items = [item for j, part in enumerate(parts) if (item := _part(f"{where}.content[{j}]", part))]
    text = "\n".join(str(item.get("text", item.get("name"))) for item in items)
    return Parts(items, text) if fmt == "openai" else text


def _part(where: str, part: Any) -> dict[str, Any] | None:
    """The part as the "openai" format gives it (``None``: a part vLLM skips)."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, Mapping):
        raise BadRequestError(f"{where} must be a string or an object", param=where)
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        text = part.get(_TEXT_PARTS[kind])
        if text is None and kind in _SKIP_IF_NONE:
            return None
        if not isinstance(text, str):
            raise BadRequestError(f"{where} ({kind}) has no text", param=where)
        return {"type": "text", "text": text}
    if kind == "tool_reference" or (kind is None and "tool_reference" in part):
        return {"type": "tool_reference", "name": part.get("name")}
    media = kind if kind is not None else next((k for k in _MEDIA_KEYS if k in part), None)
    if media is not None:
        raise BadRequestError(
            f"{where} is a {media!r} part, but this model takes text only", param=where
        )
    raise BadRequestError(f"{where} has no valid 'type'", param=where)


def _tool_call(where: str, call: Any) -> dict[str, Any]:
    if (
        not isinstance(call, Mapping)
        or not isinstance(call.get("function"), Mapping)
        or call.get("type", "function") != "function"
    ):
        raise BadRequestError(
            f"{where} must be a tool call of type 'function' with a 'function' object",
            param=where,
        )
    function = dict(call["function"])
    arguments = function.get("arguments")
    if isinstance(arguments, str) and arguments.strip():
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise BadRequestError(
                f"{where}.function.arguments is not valid JSON: {exc}",
                param=f"{where}.function.arguments",
            ) from None
    function["arguments"] = arguments if isinstance(arguments, dict) else {}
    return {**call, "function": function}
