"""Qwen3-Coder tool calls: XML-like function and parameter tags around bare-text values.

    <tool_call>
    <function=run_tests>
    <parameter=path>
    tests/unit
    </parameter>
    <parameter=verbose>
    true
    </parameter>
    </function>
    </tool_call>

Each value loses the one newline the template puts on either side of it, then is typed by the
tool's JSON schema (``schema.convert_value``). Inside a parameter value, ``</tool_call>`` is
text: a value ends at ``</parameter>`` (or, leniently, at the next ``<parameter=`` or at
``</function>``).
"""

from __future__ import annotations

from typing import Any

from app.protocol.output.hermes import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from app.protocol.output.interface import Call, Format, Schemas, TagCalls
from app.protocol.output.scanning import ValueSkippingEnd, find_tag
from app.protocol.output.schema import convert_value, encode_call

FUNCTION_OPEN = "<function="
FUNCTION_CLOSE = "</function>"
PARAMETER_OPEN = "<parameter="
PARAMETER_CLOSE = "</parameter>"


def coder_block_end(close: str = TOOL_CALL_CLOSE) -> ValueSkippingEnd:
    """The end of a block closed by ``close`` (Seed-OSS writes the same calls in another
    wrapper): a value ends at ``</parameter>`` or, leniently, at ``</function>``."""
    return ValueSkippingEnd((close,), (PARAMETER_OPEN,), (PARAMETER_CLOSE, FUNCTION_CLOSE))


def _strip_template_newlines(value: str) -> str:
    value = value.removeprefix("\n")
    return value.removesuffix("\n")


def _parameters(inner: str, schemas: dict[str, Any], python: bool) -> dict[str, Any] | None:
    """The typed parameters written in ``inner``; ``None`` if anything else is there, or a
    name twice (one value would be lost)."""
    parameters: dict[str, Any] = {}
    pos = 0
    while (start := inner.find(PARAMETER_OPEN, pos)) >= 0:
        name_end = inner.find(">", start)
        if inner[pos:start].strip() or name_end < 0:
            return None
        name = inner[start + len(PARAMETER_OPEN) : name_end].strip()
        if not name or "\n" in name or name in parameters:
            return None
        end = find_tag(inner, (PARAMETER_CLOSE, PARAMETER_OPEN), name_end + 1)
        value_end = end[0] if end is not None else len(inner)
        raw = _strip_template_newlines(inner[name_end + 1 : value_end])
        parameters[name] = convert_value(raw, schemas.get(name), python=python)
        pos = value_end + len(PARAMETER_CLOSE) if end and end[1] == PARAMETER_CLOSE else value_end
    return None if inner[pos:].strip() else parameters


def decode_qwen3_coder(block: str, schemas: Schemas, *, python: bool = False) -> list[Call] | None:
    """The call in a block's text, or ``None`` when it is not a tool call; values are typed
    by ``schemas`` (unknown tools get string values), objects, arrays and null read as Python
    literals too with ``python`` (``schema.convert_value``)."""
    text = block.strip()
    name_end = text.find(">")
    if not text.startswith(FUNCTION_OPEN) or name_end < 0 or not text.endswith(FUNCTION_CLOSE):
        return None
    name = text[len(FUNCTION_OPEN) : name_end].strip()
    if not name or "\n" in name:
        return None
    body_start, body_end = name_end + 1, len(text) - len(FUNCTION_CLOSE)
    if body_start > body_end:
        return None
    parameters = _parameters(text[body_start:body_end], schemas.get(name, {}), python)
    call = None if parameters is None else encode_call(name, parameters)
    return None if call is None else [call]


FORMAT = Format(
    name="qwen3_coder",
    template_markers=(TOOL_CALL_OPEN, FUNCTION_OPEN, PARAMETER_OPEN),
    calls=TagCalls(
        opens=(TOOL_CALL_OPEN,),
        close=TOOL_CALL_CLOSE,
        block_end=coder_block_end,
        decode=decode_qwen3_coder,
    ),
)
