"""Request messages -> the dicts a chat template sees, as vLLM + transformers build them.

vLLM (``parse_chat_messages``) rebuilds each message from the request: the content becomes
one string (text parts joined with ``"\\n"``) for "string"-format templates or a list of
``{"type": "text", "text": ...}`` parts for "openai"-format ones; assistant messages keep
``tool_calls`` and their reasoning (under ``reasoning`` and ``reasoning_content``), tool
messages their ``tool_call_id``; then assistant ``tool_calls[].function.arguments`` JSON
strings become objects and empty ``tool_calls`` lists are dropped. transformers
(``apply_chat_template``) then drops ``None``-valued keys and aliases reasoning under
``thinking`` and ``reasoning_content``.

Departures, on purpose: arguments that are not valid JSON are a 400 naming the message
(vLLM silently renders ``{}``; an empty or blank string still means ``{}``, as there), and
any non-text part (image, audio, video, embeddings) is a 400: the proxy sends token ids, so
it serves text-only models.

A template's content format is "openai" when it loops over a message's ``content`` (found,
like vLLM, by following ``messages`` through assignments and loops in the Jinja AST), else
"string".
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from jinja2 import nodes

from app.errors import BadRequestError

ContentFormat = Literal["string", "openai"]

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


def detect_content_format(root: nodes.Template) -> ContentFormat:
    """ "openai" if the template iterates over some message's ``content``, else "string"."""
    message_vars = {name for _, name in _loops_over(root, _aliases(root, "messages"), None)}
    return "openai" if next(_loops_over(root, message_vars, "content"), None) else "string"


def _reads(node: nodes.Node, var: str, key: str | None) -> bool:
    """Whether ``node`` is ``var`` (or ``var[key]``/``var.key``), possibly under filters,
    tests or a slice."""
    while (inner := _unwrapped(node)) is not None:
        node = inner
    if key is not None:
        if isinstance(node, nodes.Getitem):
            named = isinstance(node.arg, nodes.Const) and node.arg.value == key
        elif isinstance(node, nodes.Getattr):
            named = node.attr == key
        else:
            return False
        return named and _reads_name(node.node, var)
    return _reads_name(node, var)


def _unwrapped(node: nodes.Node) -> nodes.Node | None:
    if isinstance(node, nodes.Filter | nodes.Test) and node.node is not None:
        return node.node
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
        return node.node
    return None


def _reads_name(node: nodes.Node, var: str) -> bool:
    return isinstance(node, nodes.Name) and node.ctx == "load" and node.name == var


def _aliases(root: nodes.Template, var: str) -> set[str]:
    """``var`` and every name assigned from it (transitively), ignoring scopes as vLLM does."""
    found = {var}
    pending = [var]
    while pending:
        current = pending.pop()
        for assign in root.find_all(nodes.Assign):
            name = assign.target.name if isinstance(assign.target, nodes.Name) else None
            if name is not None and name not in found and _reads(assign.node, current, None):
                found.add(name)
                pending.append(name)
    return found


def _loops_over(
    root: nodes.Template, names: set[str], key: str | None
) -> Iterator[tuple[nodes.For, str]]:
    for loop in root.find_all(nodes.For):
        if isinstance(loop.target, nodes.Name) and any(
            _reads(loop.iter, name, key) for name in names
        ):
            yield loop, loop.target.name


def prepare_messages(
    messages: Sequence[Mapping[str, Any]], content_format: ContentFormat
) -> list[dict[str, Any]]:
    """The template's view of request messages (see the module docstring).

    Never mutates ``messages``. Raises ``BadRequestError`` naming the offending field.
    """
    if not messages:
        raise BadRequestError("messages must not be empty", param="messages")
    return [prepare_message(i, m, content_format) for i, m in enumerate(messages)]


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


def _content(where: str, content: Any, fmt: ContentFormat) -> str | list[dict[str, Any]]:
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
    out: list[Any] = []
    for j, part in enumerate(parts):
        item = _part(f"{where}.content[{j}]", part, fmt)
        if item is not None:
            out.append(item)
    return out if fmt == "openai" else "\n".join(out)


def _part(where: str, part: Any, fmt: ContentFormat) -> Any:
    if isinstance(part, str):
        return {"type": "text", "text": part} if fmt == "openai" else part
    if not isinstance(part, Mapping):
        raise BadRequestError(f"{where} must be a string or an object", param=where)
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        text = part.get(_TEXT_PARTS[kind])
        if text is None and kind in _SKIP_IF_NONE:
            return None
        if not isinstance(text, str):
            raise BadRequestError(f"{where} ({kind}) has no text", param=where)
        return {"type": "text", "text": text} if fmt == "openai" else text
    if kind == "tool_reference" or (kind is None and "tool_reference" in part):
        name = part.get("name")
        return {"type": "tool_reference", "name": name} if fmt == "openai" else name
    media = kind if kind is not None else next((k for k in _MEDIA_KEYS if k in part), None)
    if media is not None:
        raise BadRequestError(
            f"{where} is a {media!r} part, but this model takes text only", param=where
        )
    raise BadRequestError(f"{where} has no valid 'type'", param=where)


def _tool_call(where: str, call: Any) -> dict[str, Any]:
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        raise BadRequestError(f"{where} must be an object with a 'function'", param=where)
    function = dict(call["function"])
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        if arguments.strip():
            try:
                function["arguments"] = json.loads(arguments)
            except json.JSONDecodeError as exc:
                raise BadRequestError(
                    f"{where}.function.arguments is not valid JSON: {exc}",
                    param=f"{where}.function.arguments",
                ) from None
        else:
            function["arguments"] = {}
    elif not isinstance(arguments, dict | list):
        function["arguments"] = {}
    return {**call, "function": function}
