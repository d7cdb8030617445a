"""Llama 3.x tool calls: a JSON object with a name and parameters, nothing around it.

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}
    {"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}}

Meta's chat templates ask for ``{"name": ..., "parameters": ...}``; models also write
``"arguments"`` and sometimes ``"type": "function"``. A call starts after ``<|python_tag|>``
(a special token: kept only when the upstream keeps special tokens) or as a bare ``{`` that
opens the answer; several are separated by ``;``. JSON that is not such an object (an answer
the user asked to have in JSON) is content. vLLM reads a bare call only at the start of the
output too; text after the calls is kept as content here, where vLLM drops it.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from app.protocol.output.interface import Call, Format, Schemas, TagCalls
from app.protocol.output.json_args import JsonCursor
from app.protocol.output.leading import LeadingCallsParser
from app.protocol.output.schema import encode_call, loads_strict

PYTHON_TAG = "<|python_tag|>"
BARE_CALL_START = "{"
SEPARATOR = ";"
TEMPLATE_INSTRUCTION = '"parameters": dictionary of argument name and its value'
"""What Meta's Llama 3.1/3.2/3.3 chat templates tell the model to write (``auto``)."""

_ENVELOPES = ({"name", "parameters"}, {"name", "arguments"})


class Llama3CallsEnd:
    """Finds where the calls after ``<|python_tag|>`` (or from a bare ``{``) end.

    They end after a JSON object that is not followed by ``;``: the next character that is
    not whitespace decides, so the end is only known once it arrives or the output is over.
    Text that does not open an object ends them at once.
    """

    def __init__(self) -> None:
        self._cursor: JsonCursor | None = None
        self._pos = 0  # where the next object, or what follows the last one, is looked for
        self._objects_end = 0  # just after the last complete object

    def find(self, body: str) -> int | None:
        """Where the calls end in ``body`` (the text after the tag), if known yet."""
        while True:
            if self._cursor is not None:
                end = self._cursor.scan(body)
                if end is None:
                    return None
                self._cursor = None
                self._pos = self._objects_end = end
                continue
            rest = body[self._pos :]
            stripped = rest.lstrip()
            if not stripped:
                return None
            at = len(body) - len(stripped)
            if stripped[0] == "{":
                self._cursor = JsonCursor(ends_with_value=True)
                self._cursor.pos = at
            elif stripped[0] == SEPARATOR and self._objects_end:
                self._pos = at + 1
            else:
                return self._objects_end


def _call(text: str) -> Call | None:
    try:
        value: Any = loads_strict(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.pop("type", "function") != "function":
        return None
    if set(value) not in _ENVELOPES or not isinstance(value["name"], str) or not value["name"]:
        return None
    arguments = value.get("parameters", value.get("arguments"))
    return encode_call(value["name"], arguments) if isinstance(arguments, dict) else None


def decode_llama3_json(block: str, schemas: Schemas) -> list[Call] | None:
    """The calls in ``block``: JSON objects separated by ``;`` (one may trail). ``None``
    unless every object is a call and nothing else is there (the JSON carries its own types:
    no ``schemas``)."""
    calls: list[Call] = []
    cursor = JsonCursor(ends_with_value=True)
    expect_object = True
    while rest := block[cursor.pos :].lstrip():
        start = len(block) - len(rest)
        if not expect_object and rest[0] == SEPARATOR:
            cursor.pos, expect_object = start + 1, True
            continue
        if not expect_object or rest[0] != "{":
            return None
        cursor.pos = start
        end = cursor.scan(block)
        call = None if end is None else _call(block[start:end])
        if end is None or call is None:
            return None
        calls.append(call)
        cursor = JsonCursor(ends_with_value=True)
        cursor.pos, expect_object = end, False
    return calls or None


CALLS = TagCalls(
    opens=(PYTHON_TAG,), close=None, block_end=Llama3CallsEnd, decode=decode_llama3_json
)

FORMAT = Format(
    name="llama3_json",
    template_markers=(TEMPLATE_INSTRUCTION,),
    reasoning=None,
    parser=partial(LeadingCallsParser, leading=BARE_CALL_START, calls=CALLS),
    special_tokens=(PYTHON_TAG,),
)
