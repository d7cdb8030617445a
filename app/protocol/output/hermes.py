"""Hermes-style tool calls (Hermes 2 Pro, Qwen2.5, Qwen3): a JSON object between tags.

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

A ``</tool_call>`` inside a JSON string value (code that mentions the tag) does not close the
block: the end scanner tracks JSON string state, so such calls still parse.
"""

from __future__ import annotations

from app.protocol.output.interface import Call, Format, Schemas, TagCalls
from app.protocol.output.json_args import JsonCursor
from app.protocol.output.schema import encode_call, loads_strict

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"


class HermesBlockEnd:
    """Finds the ``</tool_call>`` that closes a block, scanning only text not seen before."""

    def __init__(self) -> None:
        self._cursor = JsonCursor(stops="<")

    def find(self, body: str) -> int | None:
        """Where the closing tag starts in ``body`` (the text after ``<tool_call>``), if yet."""
        while (at := self._cursor.scan(body)) is not None:
            if body.startswith(TOOL_CALL_CLOSE, at):
                return at
            if TOOL_CALL_CLOSE.startswith(body[at:]):
                return None  # a tag still arriving
            self._cursor.skip(1)
        return None


def decode_hermes(block: str, schemas: Schemas) -> list[Call] | None:
    """The call in a block's text, or ``None`` when it is not a tool call (the JSON carries
    its own types: ``schemas`` is not needed)."""
    try:
        value = loads_strict(block)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    name = value.get("name")
    arguments = value.get("arguments", {})
    if not isinstance(name, str) or not name or not isinstance(arguments, dict):
        return None
    call = encode_call(name, arguments)
    return None if call is None else [call]


FORMAT = Format(
    name="hermes",
    template_markers=(TOOL_CALL_OPEN,),
    calls=TagCalls(
        opens=(TOOL_CALL_OPEN,),
        close=TOOL_CALL_CLOSE,
        block_end=HermesBlockEnd,
        decode=decode_hermes,
    ),
)
