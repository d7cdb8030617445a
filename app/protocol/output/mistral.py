"""Mistral tool calls: ``[TOOL_CALLS]`` and a name, then JSON arguments with no closing marker.

    [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}
    [TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris"}      (Mistral Small 3.2)
    [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]  (before tokenizer v11)

Devstral, Mistral Small 3.x, Ministral 3 and Magistral write one ``[TOOL_CALLS]`` per call;
a call ends where its JSON value does. ``name{...}`` without ``[ARGS]`` is read too (vLLM
does). Older models (Mistral 7B v0.3, Nemo) write one JSON array of every call. The markers
are special tokens: the upstream must keep special tokens in its output text. Magistral
reasons between ``[THINK]`` and ``[/THINK]`` (special tokens too); a ``[TOOL_CALLS]``
before ``[/THINK]`` ends the reasoning, as vLLM reads it.

Mistral's chat templates refuse tool call ids that are not 9 letters and digits, so calls
get such ids (``new_mistral_call_id``); the id a model writes after ``[CALL_ID]`` is read
past, not kept (a template writes back whichever id the client returns).
"""

from __future__ import annotations

import re
import secrets
import string
from typing import Any

from app.protocol.output.interface import Call, Format, Reasoning, Schemas, TagCalls
from app.protocol.output.json_args import JsonCursor, json_object_text
from app.protocol.output.scanning import partial_tag_start
from app.protocol.output.schema import encode_call, loads_strict

TOOL_CALLS = "[TOOL_CALLS]"
ARGS = "[ARGS]"
CALL_ID = "[CALL_ID]"
THINK_OPEN = "[THINK]"
THINK_CLOSE = "[/THINK]"

_ID_CHARS = string.ascii_letters + string.digits
_NAME_CHAR = re.compile(r"[\w.\-]")
_HEAD_MARKERS = (ARGS, CALL_ID)
_CALL = re.compile(
    r"\s*(?P<name>[\w.\-]+)(?:\[CALL_ID\][A-Za-z0-9]+)?(?:\[ARGS\])?(?P<args>\s*\{.*)",
    re.DOTALL,
)


def new_mistral_call_id() -> str:
    """Nine random letters and digits, the only ids Mistral's chat templates accept."""
    return "".join(secrets.choice(_ID_CHARS) for _ in range(9))


class MistralCallEnd:
    """Finds where a call that followed ``[TOOL_CALLS]`` ends, scanning only new text.

    The call ends just after its JSON value closes; a head that cannot be a name (and id)
    ends it where it goes wrong, so the text stops being held and is returned as content.
    """

    def __init__(self) -> None:
        self._pos = 0
        self._value: JsonCursor | None = None
        self._head_seen = False  # a name character or marker has been read
        self._after_args = False  # [ARGS] was the last thing read: whitespace may follow

    def find(self, body: str) -> int | None:
        """Where the call ends in ``body`` (the text after ``[TOOL_CALLS]``), if yet."""
        if self._value is not None:
            return self._value.scan(body)
        while self._pos < len(body):
            char = body[self._pos]
            marker = next((m for m in _HEAD_MARKERS if body.startswith(m, self._pos)), None)
            if marker is not None:
                self._pos += len(marker)
                self._head_seen = True
                self._after_args = marker == ARGS
                continue
            if char == "[" and partial_tag_start(body, _HEAD_MARKERS, self._pos) == self._pos:
                return None  # a marker still arriving
            if char == "{" or (char == "[" and not self._head_seen):
                self._value = JsonCursor(ends_with_value=True)
                self._value.pos = self._pos
                return self._value.scan(body)
            if _NAME_CHAR.match(char):
                self._head_seen = True
            elif not (char.isspace() and (self._after_args or not self._head_seen)):
                return self._pos
            self._pos += 1
        return None


def _legacy_calls(text: str) -> list[Call] | None:
    try:
        value: Any = loads_strict(text)
    except ValueError:
        return None
    if not isinstance(value, list) or not value:
        return None
    calls: list[Call] = []
    for item in value:
        if not isinstance(item, dict) or not set(item) <= {"name", "arguments", "id"}:
            return None
        name, arguments = item.get("name"), item.get("arguments", {})
        if not isinstance(name, str) or not name or not isinstance(arguments, dict):
            return None
        encoded = encode_call(name, arguments)
        if encoded is None:
            return None
        calls.append(encoded)
    return calls


def decode_mistral(block: str, schemas: Schemas) -> list[Call] | None:
    """The call(s) written after one ``[TOOL_CALLS]``; ``None`` when not well formed (the
    JSON carries its own types, ``schemas`` is not needed)."""
    if block.lstrip().startswith("["):
        return _legacy_calls(block)
    match = _CALL.fullmatch(block)
    if match is None:
        return None
    arguments = json_object_text(match["args"])
    return None if arguments is None else [(match["name"], arguments)]


FORMAT = Format(
    name="mistral",
    template_markers=(TOOL_CALLS,),
    reasoning=Reasoning(THINK_OPEN, THINK_CLOSE),
    calls=TagCalls(
        opens=(TOOL_CALLS,),
        close=None,
        block_end=MistralCallEnd,
        decode=decode_mistral,
        end_reasoning=True,
    ),
    special_tokens=(TOOL_CALLS, ARGS, CALL_ID, THINK_OPEN, THINK_CLOSE),
    call_id=new_mistral_call_id,
)
