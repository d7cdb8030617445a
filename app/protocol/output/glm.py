"""GLM tool calls: the function name, then key and value tags around bare-text values.

GLM-4.5 and GLM-4.6 (``glm45``) put each tag on its own line::

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    </tool_call>

GLM-4.7 and GLM-5 (``glm47``) write the same without the newlines
(``<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>``).
One decoder reads both: whitespace between tags is layout. A key is stripped; a value is
verbatim (the template writes strings raw and other types as JSON), typed by the tool's JSON
schema (``schema.convert_value``). Inside a value, ``</tool_call>`` is text. The model writes
reasoning in ``<think>`` (GLM-4.7's prompt opens it).
"""

from __future__ import annotations

from typing import Any

from app.protocol.output.hermes import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from app.protocol.output.interface import Call, Format, Schemas, TagCalls
from app.protocol.output.scanning import ValueSkippingEnd, skip_space
from app.protocol.output.schema import convert_value, encode_call

KEY_OPEN = "<arg_key>"
KEY_CLOSE = "</arg_key>"
VALUE_OPEN = "<arg_value>"
VALUE_CLOSE = "</arg_value>"


def glm_block_end() -> ValueSkippingEnd:
    return ValueSkippingEnd((TOOL_CALL_CLOSE,), (VALUE_OPEN,), (VALUE_CLOSE,))


def _between(text: str, pos: int, opening: str, closing: str) -> tuple[str, int] | None:
    """The text between ``opening`` (after optional whitespace at ``pos``) and ``closing``,
    and where the text after ``closing`` starts; None when that is not what is there."""
    start = skip_space(text, pos)
    if not text.startswith(opening, start):
        return None
    end = text.find(closing, start + len(opening))
    if end < 0:
        return None
    return text[start + len(opening) : end], end + len(closing)


def _arguments(text: str, pos: int, schemas: dict[str, Any]) -> dict[str, Any] | None:
    """The typed key/value pairs from ``pos`` on; None if anything else is there, or a key
    twice (one value would be lost)."""
    arguments: dict[str, Any] = {}
    while skip_space(text, pos) < len(text):
        key = _between(text, pos, KEY_OPEN, KEY_CLOSE)
        value = None if key is None else _between(text, key[1], VALUE_OPEN, VALUE_CLOSE)
        if key is None or value is None:
            return None
        name = key[0].strip()
        if not name or name in arguments:
            return None
        arguments[name] = convert_value(value[0], schemas.get(name))
        pos = value[1]
    return arguments


def decode_glm(block: str, schemas: Schemas) -> list[Call] | None:
    """The call in a block's text, or ``None`` when it is not a tool call."""
    name_end = block.find(KEY_OPEN)
    if name_end < 0:
        name_end = len(block)
    name = block[:name_end].strip()
    if not name or any(c.isspace() or c in "<>{}" for c in name):
        return None
    arguments = _arguments(block, name_end, schemas.get(name, {}))
    call = None if arguments is None else encode_call(name, arguments)
    return None if call is None else [call]


_CALLS = TagCalls(
    opens=(TOOL_CALL_OPEN,),
    close=TOOL_CALL_CLOSE,
    block_end=glm_block_end,
    decode=decode_glm,
    end_reasoning=True,
)
_SPECIAL = (
    TOOL_CALL_OPEN,
    TOOL_CALL_CLOSE,
    KEY_OPEN,
    KEY_CLOSE,
    VALUE_OPEN,
    VALUE_CLOSE,
    "<think>",
    "</think>",
)

GLM45 = Format(
    name="glm45",
    template_markers=(TOOL_CALL_OPEN, KEY_OPEN, KEY_CLOSE + "\n" + VALUE_OPEN),
    calls=_CALLS,
    special_tokens=_SPECIAL,
)

GLM47 = Format(
    name="glm47",
    template_markers=(TOOL_CALL_OPEN, KEY_OPEN, KEY_CLOSE + VALUE_OPEN),
    calls=_CALLS,
    special_tokens=_SPECIAL,
)
