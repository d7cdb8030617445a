"""Gemma 4 tool calls: ``call:NAME{...}`` in Gemma's own object notation, between tokens.

    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3,opts:{units:<|"|>c<|"|>}}<tool_call|>

Keys are bare (or quoted), strings are quoted with the ``<|"|>`` token, objects and arrays
nest, other values (numbers, ``true``, ``false``, ``null``) are bare: a bare value the tool's
schema declares a string stays text, any other is its JSON reading (text when it has none).
A ``<tool_call|>`` inside a quoted string is text. Reasoning is the ``thought`` channel,
``<|channel>thought`` … ``<channel|>``. Every marker is a special token, and the model ends a
turn of calls by writing ``<|tool_response>``, where the upstream has to stop.
"""

from __future__ import annotations

from typing import Any

from app.protocol.output.interface import Call, Format, Reasoning, Schemas, TagCalls
from app.protocol.output.scanning import ValueSkippingEnd, skip_space
from app.protocol.output.schema import encode_call, loads_strict

TOOL_CALL_OPEN = "<|tool_call>"
TOOL_CALL_CLOSE = "<tool_call|>"
QUOTE = '<|"|>'
CALL_PREFIX = "call:"
THOUGHT = Reasoning("<|channel>thought", "<channel|>")
TOOL_RESPONSE = "<|tool_response>"


class _Malformed(Exception):
    pass


def gemma4_block_end() -> ValueSkippingEnd:
    return ValueSkippingEnd((TOOL_CALL_CLOSE,), (QUOTE,), (QUOTE,))


def _schema_is_string(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "string"


class _Reader:
    """A recursive-descent reader of one call's argument object."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def expect(self, char: str) -> None:
        self.pos = skip_space(self.text, self.pos)
        if not self.text.startswith(char, self.pos):
            raise _Malformed
        self.pos += len(char)

    def peek(self, char: str) -> bool:
        self.pos = skip_space(self.text, self.pos)
        return self.text.startswith(char, self.pos)

    def quoted(self) -> str:
        self.expect(QUOTE)
        end = self.text.find(QUOTE, self.pos)
        if end < 0:
            raise _Malformed
        value, self.pos = self.text[self.pos : end], end + len(QUOTE)
        return value

    def bare(self, stops: str) -> str:
        start = self.pos = skip_space(self.text, self.pos)
        while self.pos < len(self.text) and self.text[self.pos] not in stops:
            if self.text.startswith(QUOTE, self.pos):
                raise _Malformed
            self.pos += 1
        value = self.text[start : self.pos].strip()
        if not value:
            raise _Malformed
        return value

    def object(self, schemas: dict[str, Any]) -> dict[str, Any]:
        self.expect("{")
        out: dict[str, Any] = {}
        while not self.peek("}"):
            if out:
                self.expect(",")
            key = self.quoted() if self.peek(QUOTE) else self.bare(":,{}[]")
            self.expect(":")
            if key in out:
                raise _Malformed
            out[key] = self.value(schemas.get(key))
        self.expect("}")
        return out

    def array(self) -> list[Any]:
        self.expect("[")
        out: list[Any] = []
        while not self.peek("]"):
            if out:
                self.expect(",")
            out.append(self.value(None))
        self.expect("]")
        return out

    def value(self, schema: Any) -> Any:
        if self.peek(QUOTE):
            return self.quoted()
        if self.peek("{"):
            nested = schema.get("properties") if isinstance(schema, dict) else None
            return self.object(nested if isinstance(nested, dict) else {})
        if self.peek("["):
            return self.array()
        raw = self.bare(",}]")
        if _schema_is_string(schema):
            return raw
        try:
            value = loads_strict(raw)
        except ValueError:
            return raw
        return raw if isinstance(value, dict | list | str) else value


def decode_gemma4(block: str, schemas: Schemas) -> list[Call] | None:
    """The call in a block's text, or ``None`` when it is not a tool call."""
    text = block.strip()
    brace = text.find("{")
    if not text.startswith(CALL_PREFIX) or brace < 0:
        return None
    name = text[len(CALL_PREFIX) : brace]
    if not name or any(c.isspace() or c in "<>:" for c in name):
        return None
    reader = _Reader(text)
    reader.pos = brace
    try:
        arguments = reader.object(schemas.get(name, {}))
    except (_Malformed, RecursionError):
        return None
    if skip_space(text, reader.pos) != len(text):
        return None
    call = encode_call(name, arguments)
    return None if call is None else [call]


FORMAT = Format(
    name="gemma4",
    template_markers=(TOOL_CALL_OPEN, QUOTE),
    reasoning=THOUGHT,
    calls=TagCalls(
        opens=(TOOL_CALL_OPEN,),
        close=TOOL_CALL_CLOSE,
        block_end=gemma4_block_end,
        decode=decode_gemma4,
        end_reasoning=True,
    ),
    special_tokens=(
        TOOL_CALL_OPEN,
        TOOL_CALL_CLOSE,
        QUOTE,
        TOOL_RESPONSE,
        "<|channel>",
        "<channel|>",
    ),
    stop=(TOOL_RESPONSE,),
)
