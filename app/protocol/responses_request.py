"""OpenAI Responses request -> the canonical chat completions body.

What Codex CLI sends (``wire_api = "responses"``) maps onto chat like this:

- ``instructions`` becomes the first message, role ``system`` (none when empty, as in vLLM).
- ``input`` is a string (one user message) or a list of items, turned into chat messages
  as vLLM's Responses endpoint turns them (``construct_input_messages``), so that a
  conversation renders as vLLM would render it:
  ``message`` items (role user / assistant / system / developer; content a string or
  ``input_text`` / ``output_text`` / ``refusal`` parts) keep their role, ``developer``
  included (the renderer makes it ``system`` for a template that does not name the role,
  ``app.rendering.messages``; Codex sends its sandbox and approval rules as developer
  messages); their parts become chat text parts, except that an assistant message is its
  first part's text; ``input_image`` / ``input_file`` / ``input_audio`` are a 400: the proxy
  sends token ids, so it serves text-only models.  ``function_call`` items become
  ``tool_calls`` (``call_id`` is the call's id) of the last message when it is an assistant
  turn, else of a new one; ``function_call_output`` becomes a ``tool`` message.
- ``reasoning`` items: their text (the first ``content`` reasoning text, else the first
  ``summary`` text, else empty) becomes the ``reasoning_content`` of the last message when it
  is an assistant turn without one, else of a new assistant turn; an assistant message's text
  likewise fills the last assistant turn when it has no content yet.  So Codex's reasoning,
  message and calls of one answer make one assistant turn.  ``encrypted_content`` is opaque
  and ignored (vLLM refuses it): this proxy never emits it, so only a history from another
  server carries it.
- ``tools``: ``function`` tools become chat tools; built-in and custom tools (web_search,
  local_shell, file_search, custom, ...) are dropped: the model behind the proxy cannot call
  them, and a 400 would stop Codex, which sends some of them unasked.
- ``tool_choice`` and ``parallel_tool_calls`` pass through (translated); ``max_output_tokens``
  is ``max_tokens``; ``temperature`` / ``top_p`` pass; ``reasoning.effort == "none"`` sets the
  template kwarg ``enable_thinking: false`` (Qwen3 and kin; others ignore it), other efforts
  are ignored.  ``text.format`` is the chat ``response_format`` (``app.protocol.output_options``;
  log probabilities are a 400); ``include``, ``metadata``, ``user`` are ignored.
- ``store`` is accepted either way and nothing is ever stored, so ``previous_response_id``
  and ``item_reference`` items are a 400.
- The stream always asks for usage: the final event carries it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.errors import BadRequestError
from app.memos import Memos
from app.protocol.json_text import text_size
from app.protocol.output_options import responses_fields

_MESSAGE_ROLES = frozenset({"user", "assistant", "system", "developer"})
_TEXT_PARTS = {"input_text": "text", "output_text": "text", "text": "text", "refusal": "refusal"}
_MEDIA_PARTS = frozenset({"input_image", "input_file", "input_audio", "image_url"})


@dataclass(slots=True)
class _Turns:
    """Chat messages of the ``input`` items seen so far, resumable with more items."""

    messages: list[dict[str, Any]]
    instructions: str | None
    """The ``instructions`` the system turn opening ``messages`` came from."""
    n_items: int = 0
    last_item: Any = None
    size: int = 0
    """Bytes this holds on to, estimated: the item texts (shared with the parsed body, but
    kept alive by this) and ~256 per message."""

    def resumed(self) -> _Turns:
        return _Turns(
            list(self.messages), self.instructions, self.n_items, self.last_item, self.size
        )

    def add(self, items: list[Any]) -> None:
        out = self.messages
        for index in range(self.n_items, len(items)):
            item = items[index]
            where = f"input[{index}]"
            if not isinstance(item, dict):
                raise BadRequestError(f"{where} must be an object", param=where)
            self.size += 256 + text_size(item)
            kind = item.get("type", "message" if "role" in item else None)
            if kind == "message":
                message = _message(item, where)
                if message["role"] == "assistant" and isinstance(message["content"], str):
                    self._to_assistant("content", message["content"], message)
                else:
                    out.append(message)
            elif kind == "function_call":
                call = _function_call(item, where)
                last = out[-1] if out else None
                if last is not None and last["role"] == "assistant":
                    # a new dict: the previous one may be a previous call's, only ever read
                    out[-1] = {**last, "tool_calls": [*last.get("tool_calls", ()), call]}
                else:
                    # content null, as an OpenAI tool-call turn has it
                    out.append({"role": "assistant", "content": None, "tool_calls": [call]})
            elif kind == "function_call_output":
                call_id = item.get("call_id")
                if not isinstance(call_id, str):
                    raise BadRequestError(f"{where}.call_id must be a string", param=where)
                output = _text(item.get("output"), f"{where}.output")
                out.append({"role": "tool", "tool_call_id": call_id, "content": output})
            elif kind == "reasoning":
                text = _reasoning_text(item, where)
                turn = {"role": "assistant", "content": None, "reasoning_content": text}
                self._to_assistant("reasoning_content", text, turn)
            elif kind == "item_reference":
                raise BadRequestError(
                    f"{where}: item references are not supported (this proxy stores nothing)",
                    param=where,
                )
            else:
                raise BadRequestError(
                    f"{where}.type {kind!r} is not supported; use message, function_call, "
                    "function_call_output or reasoning items",
                    param=where,
                )
        self.n_items = len(items)
        self.last_item = items[-1] if items else None

    def _to_assistant(self, field: str, value: str, turn: dict[str, Any]) -> None:
        """``value`` as ``field`` of the last message when it is an assistant turn without
        one, else ``turn`` as a new message (vLLM's ``_construct_message_from_response_item``)."""
        out = self.messages
        last = out[-1] if out else None
        if last is not None and last["role"] == "assistant" and last.get(field) is None:
            out[-1] = {**last, field: value}  # a new dict, as for a call
        else:
            out.append(turn)


class ChatTranslator:
    """``chat_body`` with a per-session memo: when the body parser reused the previous
    call's first ``input`` items (the same objects) and ``instructions`` is the previous
    call's (the one other field the messages come from; every other field is translated on
    every call), only the new items are translated, and the messages they made are the
    previous call's objects (so ``parse_chat_request`` need not check them again).  A memo's
    size: the item texts it keeps alive and ~256 per message."""

    def __init__(self, memos: Memos[_Turns]) -> None:
        self._memo = memos

    def translate(self, body: Any, key: str, reused: int) -> tuple[dict[str, Any], int]:
        """(chat body, how many leading messages are the previous call's, checked)."""
        previous = self._memo.get(key) if reused > 0 else None
        turns = None
        items = body.get("input") if isinstance(body, dict) else None
        if (
            previous is not None
            and isinstance(items, list)
            and previous.n_items == reused
            and items[reused - 1] is previous.last_item
            # the system turn the kept messages open with (exact: JSON strings or None)
            and previous.instructions == body.get("instructions")
        ):
            turns = previous.resumed()
        chat, done = _chat_body(body, turns)
        if done is not None:
            self._memo.put(key, done, done.size + 256)
        # the previous call's last message may since have gained tool calls (a new dict)
        validated = len(previous.messages) - 1 if turns is not None and previous else 0
        return chat, max(validated, 0)


def chat_body(body: Any) -> dict[str, Any]:
    """The chat completions body that asks for what ``body`` (a Responses request) asks for;
    raises ``BadRequestError`` naming the offending field."""
    return _chat_body(body, None)[0]


def _chat_body(body: Any, turns: _Turns | None) -> tuple[dict[str, Any], _Turns | None]:
    if not isinstance(body, dict):
        raise BadRequestError("the request body must be a JSON object")
    if body.get("previous_response_id") is not None:
        raise BadRequestError(
            "previous_response_id is not supported: this proxy stores no responses; "
            "send the whole conversation in 'input'",
            param="previous_response_id",
        )
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise BadRequestError("'instructions' must be a string", param="instructions")
    items = body.get("input")
    chat: dict[str, Any] = {"model": body.get("model")}
    if isinstance(items, str):
        messages = [{"role": "user", "content": items}]
        if instructions:
            messages.insert(0, {"role": "system", "content": instructions})
        chat["messages"] = messages
    elif isinstance(items, list):
        if turns is None:
            opening = [{"role": "system", "content": instructions}] if instructions else []
            turns = _Turns(opening, instructions)
        turns.add(items)
        chat["messages"] = turns.messages
    else:
        raise BadRequestError("'input' must be a string or an array of items", param="input")
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        if "tool_choice" in body:
            chat["tool_choice"] = _tool_choice(body["tool_choice"])
        if isinstance(body.get("parallel_tool_calls"), bool):
            chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            chat[name] = body[name]
    limit = body.get("max_output_tokens")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise BadRequestError(
                "'max_output_tokens' must be a positive integer", param="max_output_tokens"
            )
        chat["max_tokens"] = limit
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise BadRequestError("'stream' must be a boolean", param="stream")
    if stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort") == "none":
        chat["chat_template_kwargs"] = {"enable_thinking": False}
    chat |= responses_fields(body)
    return chat, turns


def _message(item: dict[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in _MESSAGE_ROLES:
        raise BadRequestError(f"{where}.role must be one of {sorted(_MESSAGE_ROLES)}", param=where)
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise BadRequestError(f"{where}.content must be a string or an array", param=where)
    parts = _parts(content, f"{where}.content")
    if role == "assistant" and parts:
        return {"role": role, "content": parts[0]["text"]}  # vLLM reads the first part only
    return {"role": role, "content": parts}


def _parts(parts: list[Any], where: str) -> list[dict[str, Any]]:
    out = []
    for k, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        key = _TEXT_PARTS.get(kind) if isinstance(kind, str) else None
        if kind in _MEDIA_PARTS:
            raise BadRequestError(
                f"{where}[{k}] is {kind}: this proxy serves a text-only model; "
                "send text parts only",
                param=where,
            )
        if key is None or not isinstance(part.get(key), str):
            raise BadRequestError(
                f"{where}[{k}] must be an input_text or output_text part with a string",
                param=where,
            )
        out.append({"type": "text", "text": part[key]})
    return out


def _text(value: Any, where: str) -> str:
    """A function call output: a string, or text parts (joined, like content parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(p["text"] for p in _parts(value, where))
    raise BadRequestError(f"{where} must be a string or an array of parts", param=where)


def _function_call(item: dict[str, Any], where: str) -> dict[str, Any]:
    call_id, name = item.get("call_id"), item.get("name")
    arguments = item.get("arguments", "")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise BadRequestError(f"{where} needs a string call_id and name", param=where)
    if not isinstance(arguments, str):
        raise BadRequestError(f"{where}.arguments must be a JSON string", param=where)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _reasoning_text(item: dict[str, Any], where: str) -> str:
    """The first ``content`` reasoning text, else the first ``summary`` text, else ""."""
    for field, kind in (("content", "reasoning_text"), ("summary", "summary_text")):
        parts = item.get(field)
        if not parts:
            continue
        if not isinstance(parts, list):
            raise BadRequestError(f"{where}.{field} must be an array", param=where)
        part = parts[0]
        if not isinstance(part, dict) or part.get("type") != kind:
            raise BadRequestError(f"{where}.{field} parts must be {kind} parts", param=where)
        if not isinstance(part.get("text"), str):
            raise BadRequestError(f"{where}.{field} texts must be strings", param=where)
        text: str = part["text"]
        return text
    return ""


def _tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise BadRequestError("'tools' must be an array", param="tools")
    out = []
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue  # built-in / custom tools: nothing here can run them
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequestError(f"tools[{k}].name is required", param="tools")
        function: dict[str, Any] = {"name": name}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return "auto"  # allowed_tools / built-in choices: nothing stricter to say in chat terms
