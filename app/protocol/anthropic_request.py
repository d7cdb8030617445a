"""Anthropic Messages request -> the canonical OpenAI chat body (then ``parse_chat_request``).

The mapping, block by block:

* ``system`` (a string or text blocks) -> one leading system message.  With
  ``strip_billing_line`` every system message made here loses Claude Code's billing line as
  vLLM's chat parsing would take it off this chat request (``billing_line``: a text block
  starting with the header loses its first line, one left empty is dropped); vLLM's own
  ``/v1/messages`` drops such blocks whole.
* ``role: "system"`` messages inside ``messages`` (Claude Code's mid-conversation system
  turns; a string or text blocks) -> system messages where they stand, rendered as the
  template renders a system turn there (``SystemTurnError`` where it refuses one).
* user text blocks -> OpenAI text parts (the renderer joins them with ``"\\n"``, as vLLM);
  ``tool_result`` blocks -> ``role: "tool"`` messages in place, ``tool_call_id`` =
  ``tool_use_id``, an error result prefixed ``"Error: "``.
* assistant text -> content (null without text blocks), ``thinking`` ->
  ``reasoning_content`` (the signature is dropped; ``redacted_thinking`` is encrypted, so
  nothing of it can be rendered), ``tool_use`` -> ``tool_calls`` (``input`` as a JSON
  string, id kept).
* images and documents -> 400: the proxy sends token ids to a text-only model.
* ``tools`` / ``tool_choice`` / ``stop_sequences`` / ``thinking`` -> their OpenAI forms (a
  tool's keys in an OpenAI tool's order: name, description, parameters);
  ``max_tokens`` is required, as Anthropic requires it.
* ``output_config.format`` (or the beta's ``output_format``), a JSON schema -> the chat
  ``response_format``.  Anthropic's API has no log probabilities: nothing to carry.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import orjson

from app.errors import BadRequestError
from app.memos import Memos
from app.protocol.billing_line import strip_content, strip_messages
from app.protocol.json_text import text_size
from app.protocol.output_options import anthropic_fields

_MEDIA = frozenset({"image", "document", "search_result", "container_upload"})
_SAMPLING = ("temperature", "top_p", "top_k")


@dataclass(frozen=True, slots=True)
class Translated:
    body: dict[str, Any]
    """The OpenAI chat completions body."""
    validated: int
    """Leading chat messages that need no check by ``parse_chat_request``: the previous
    call's objects (checked then) and the system message before them (valid by
    construction: a system role and a string or text parts)."""


@dataclass(frozen=True, slots=True)
class _Turns:
    """One call's translation of ``messages``, for the next call of the session to resume.
    Never mutated: a later call copies the lists it keeps a prefix of."""

    messages: list[dict[str, Any]]
    """The chat messages: the system message (when ``system``) then those of ``sources``."""
    system: dict[str, Any] | None
    sources: list[Any]
    """The Anthropic message objects translated (kept alive, so ``is`` is sound)."""
    ends: list[int]
    """``ends[i]``: how many chat messages ``sources[: i + 1]`` made (a user message with
    tool results makes several)."""
    sizes: list[int]
    """``sizes[i]``: estimated bytes ``sources[: i + 1]`` and their chat messages hold."""

    @property
    def size(self) -> int:
        return (self.sizes[-1] if self.sizes else 0) + 256


class ChatTranslator:
    """``to_chat_body`` with a per-session memo.  The leading Anthropic messages that are the
    previous call's objects (``is``, checked here; the body parser's ``reused_messages`` is
    where they come from) keep the previous call's chat messages, the very objects, and only
    the rest is translated.  Exact because a message's translation depends on that message
    alone (no state runs from one message to the next: a user message's tool results become
    tool messages of its own, nothing merges into a neighbour) and parsed bodies are never
    mutated, so an object that was translated before translates the same again, even the
    previous call's last message.  ``system``, ``tools`` and the other fields are translated
    on every call; the system message object is kept while its content is unchanged and
    replaced alone when it changed (Claude Code's billing line), the messages after it still
    the previous call's objects.  A memo's size: the message texts it keeps alive and ~256
    per chat message."""

    def __init__(self, memos: Memos[_Turns]) -> None:
        self._memo = memos

    def translate(self, body: Any, key: str, *, strip_billing_line: bool = False) -> Translated:
        """The chat body for ``body``, a session's (``key``) latest.  Whatever the body parser
        reused (``ParsedBody.reused_messages``, 0 when it parsed afresh) shows here as
        identity with the memo, which is what is checked: so nothing that parser says or
        gets wrong can make a reused translation stale."""
        previous = self._memo.get(key)
        translated, turns = _translate(body, strip_billing_line, False, previous)
        self._memo.put(key, turns, turns.size)
        return translated


def to_chat_body(
    body: Any,
    *,
    strip_billing_line: bool = False,
    reused_messages: int = 0,
    counting: bool = False,
) -> Translated:
    """The OpenAI chat body for an Anthropic Messages body; ``BadRequestError`` naming the
    field when it is not one.  ``reused_messages``: leading messages that were translated
    before (same objects, see ``incremental_json``): only used to count validated output.
    ``counting``: a count_tokens body (no ``max_tokens``, never streamed)."""
    translated, turns = _translate(body, strip_billing_line, counting, None)
    if not reused_messages:
        return translated
    reused = min(reused_messages, len(turns.ends))
    offset = len(turns.messages) - (turns.ends[-1] if turns.ends else 0)
    return Translated(translated.body, offset + turns.ends[reused - 1])


def _translate(
    body: Any, strip_billing_line: bool, counting: bool, previous: _Turns | None
) -> tuple[Translated, _Turns]:
    if not isinstance(body, dict):
        raise BadRequestError("the request body must be a JSON object")
    max_tokens = body.get("max_tokens")
    if max_tokens is None and not counting:
        raise BadRequestError("max_tokens: Field required", param="max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise BadRequestError("max_tokens: Input should be a positive integer", param="max_tokens")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise BadRequestError("messages: Input should be a valid list", param="messages")
    if not messages:
        raise BadRequestError("messages: at least one message is required", param="messages")
    system = _system(body.get("system"))
    if strip_billing_line and system is not None:
        system = strip_content(system)
    system_message: dict[str, Any] | None = None
    if system is not None:
        kept = previous.system if previous is not None else None
        same = kept is not None and kept["content"] == system
        system_message = kept if same else {"role": "system", "content": system}
    out: list[dict[str, Any]] = [] if system_message is None else [system_message]
    reused = _identical_prefix(messages, previous.sources) if previous is not None else 0
    if previous is not None and reused:
        start = len(previous.messages) - previous.ends[-1]  # 1 after a system message
        out += previous.messages[start : start + previous.ends[reused - 1]]
        sources, ends = previous.sources[:reused], previous.ends[:reused]
        sizes = previous.sizes[:reused]
    else:
        sources, ends, sizes = [], [], []
    size = sizes[-1] if sizes else 0
    offset = len(out) - (ends[-1] if ends else 0)  # 1 after a system message
    for index in range(reused, len(messages)):
        message = messages[index]
        made = _message(index, message)
        if strip_billing_line:
            made = strip_messages(made)
        out += made
        size += text_size(message) + 256 * len(made)
        sources.append(message)
        ends.append(len(out) - offset)
        sizes.append(size)
    validated = offset + ends[reused - 1] if reused else 0
    chat: dict[str, Any] = {
        "model": body.get("model"),
        "messages": out,
        "max_tokens": max_tokens,
        "stream": False if counting else body.get("stream", False),
        "stream_options": {"include_usage": True},
    }
    for name in _SAMPLING:
        if body.get(name) is not None:
            chat[name] = body[name]
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise BadRequestError(
                "stop_sequences: must be an array of strings", param="stop_sequences"
            )
        chat["stop"] = stops
    tools = body.get("tools")
    if tools is not None:
        chat["tools"] = _tools(tools)
    choice = body.get("tool_choice")
    if choice is not None:
        chat.update(_tool_choice(choice))
    thinking = body.get("thinking")
    if thinking is not None:
        kind = thinking.get("type") if isinstance(thinking, dict) else None
        if kind not in ("enabled", "disabled", "adaptive"):
            raise BadRequestError(
                "thinking.type: must be 'enabled' or 'disabled'", param="thinking"
            )
        chat["chat_template_kwargs"] = {"enable_thinking": kind != "disabled"}
    chat |= anthropic_fields(body)
    return Translated(chat, validated), _Turns(out, system_message, sources, ends, sizes)


def _identical_prefix(messages: list[Any], sources: list[Any]) -> int:
    """How many leading ``messages`` are the objects ``sources`` holds."""
    if not sources or messages[0] is not sources[0]:
        return 0  # a body parsed afresh: nothing to compare
    same = list(map(operator.is_, messages, sources))
    return same.index(False) if False in same else len(same)


def _system(system: Any) -> str | list[dict[str, Any]] | None:
    if system is None or system == "" or system == []:
        return None
    if isinstance(system, str):
        return system
    if not isinstance(system, list):
        raise BadRequestError("system: must be a string or an array of text blocks", param="system")
    texts = [_text_of(block, f"system.{k}") for k, block in enumerate(system)]
    return [{"type": "text", "text": t} for t in texts]


def _text_of(block: Any, where: str) -> str:
    if not isinstance(block, dict) or block.get("type") != "text":
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        raise BadRequestError(f"{where}: expected a text block, got {kind!r}", param=where)
    text = block.get("text")
    if not isinstance(text, str):
        raise BadRequestError(f"{where}.text: must be a string", param=where)
    return text


def _media_error(where: str, kind: str) -> BadRequestError:
    return BadRequestError(
        f"{where}: {kind} blocks are not supported: this proxy serves a text-only model "
        "(it sends token ids upstream); send the content as text",
        param=where,
    )


def _message(index: int, message: Any) -> list[dict[str, Any]]:
    where = f"messages.{index}"
    if not isinstance(message, dict):
        raise BadRequestError(f"{where}: Input should be a valid dictionary", param=where)
    role = message.get("role")
    if role not in ("user", "assistant", "system"):
        raise BadRequestError(
            f"{where}.role: Input should be 'user', 'assistant' or 'system'", param=f"{where}.role"
        )
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise BadRequestError(
            f"{where}.content: Input should be a valid string or a list of content blocks",
            param=f"{where}.content",
        )
    if role == "assistant":
        return [_assistant(where, content)]
    if role == "system":
        texts = [_text_of(block, f"{where}.content.{k}") for k, block in enumerate(content)]
        return [{"role": "system", "content": [{"type": "text", "text": t} for t in texts]}]
    return _user(where, content)


def _user(where: str, blocks: list[Any]) -> list[dict[str, Any]]:
    """Tool results become tool messages where they stand; runs of text, user messages."""
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for k, block in enumerate(blocks):
        at = f"{where}.content.{k}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            if parts:
                out.append({"role": "user", "content": parts})
                parts = []
            out.append(_tool_result(at, block))
        elif kind == "text":
            parts.append({"type": "text", "text": _text_of(block, at)})
        elif kind in _MEDIA:
            raise _media_error(at, kind)
        else:
            raise BadRequestError(
                f"{at}: unsupported block type {kind!r} in a user message", param=at
            )
    if parts or not out:
        out.append({"role": "user", "content": parts})
    return out


def _tool_result(where: str, block: dict[str, Any]) -> dict[str, Any]:
    ident = block.get("tool_use_id")
    if not isinstance(ident, str):
        raise BadRequestError(f"{where}.tool_use_id: must be a string", param=where)
    content = block.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = []
        for k, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in _MEDIA:
                raise _media_error(f"{where}.content.{k}", str(kind))
            texts.append(_text_of(part, f"{where}.content.{k}"))
        text = "\n".join(texts)
    else:
        raise BadRequestError(f"{where}.content: must be a string or text blocks", param=where)
    if block.get("is_error"):
        text = "Error: " + text
    return {"role": "tool", "tool_call_id": ident, "content": text}


def _assistant(where: str, blocks: list[Any]) -> dict[str, Any]:
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for k, block in enumerate(blocks):
        at = f"{where}.content.{k}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(_text_of(block, at))
        elif kind == "thinking":
            text = block.get("thinking")
            if not isinstance(text, str):
                raise BadRequestError(f"{at}.thinking: must be a string", param=at)
            thinking.append(text)
        elif kind == "redacted_thinking":
            continue  # encrypted: nothing a template could render
        elif kind == "tool_use":
            calls.append(_tool_use(at, block))
        elif kind in _MEDIA:
            raise _media_error(at, kind)
        else:
            raise BadRequestError(
                f"{at}: unsupported block type {kind!r} in an assistant message", param=at
            )
    # no text: null content, as an OpenAI tool-call turn has it (not "", which a template
    # that loops over content parts sees as one empty part)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if thinking:
        message["reasoning_content"] = "\n".join(thinking)
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_use(where: str, block: dict[str, Any]) -> dict[str, Any]:
    ident, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(ident, str) or not isinstance(name, str):
        raise BadRequestError(f"{where}: tool_use needs a string id and name", param=where)
    if not isinstance(arguments, dict):
        raise BadRequestError(f"{where}.input: must be an object", param=where)
    return {
        "id": ident,
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise BadRequestError("tools: must be an array", param="tools")
    out = []
    for k, tool in enumerate(tools):
        where = f"tools.{k}"
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise BadRequestError(f"{where}.name: is required", param=where)
        schema = tool.get("input_schema")
        if tool.get("type") not in (None, "custom") or not isinstance(schema, dict):
            raise BadRequestError(
                f"{where}: only client tools with an input_schema are supported "
                f"(got type {tool.get('type')!r}); server tools run at Anthropic",
                param=where,
            )
        function: dict[str, Any] = {"name": tool["name"]}  # an OpenAI tool's key order
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        function["parameters"] = schema
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any) -> dict[str, Any]:
    kind = choice.get("type") if isinstance(choice, dict) else None
    out: dict[str, Any]
    if kind == "auto":
        out = {"tool_choice": "auto"}
    elif kind == "any":
        out = {"tool_choice": "required"}
    elif kind == "none":
        out = {"tool_choice": "none"}
    elif kind == "tool" and isinstance(choice.get("name"), str):
        out = {"tool_choice": {"type": "function", "function": {"name": choice["name"]}}}
    else:
        raise BadRequestError(
            "tool_choice: must be {type: auto|any|none} or {type: tool, name}",
            param="tool_choice",
        )
    if choice.get("disable_parallel_tool_use"):
        out["parallel_tool_calls"] = False
    return out
