"""MiniMax M2 tool calls: a section of invokes around bare-text parameter values.

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    <parameter name="days">3</parameter>
    </invoke>
    </minimax:tool_call>

Several invokes in one section are several calls. A value is verbatim (the template writes
strings raw and other types as JSON), typed by the tool's JSON schema. Reasoning is in
``<think>``, which the template's generation prompt opens.
"""

from __future__ import annotations

from typing import Any

from app.protocol.output.interface import Call, Format, Schemas, TagCalls
from app.protocol.output.invokes import InvokeTags, decode_invokes
from app.protocol.output.scanning import ValueSkippingEnd
from app.protocol.output.schema import convert_value

SECTION_OPEN = "<minimax:tool_call>"
SECTION_CLOSE = "</minimax:tool_call>"


def _typed(raw: str, attributes: dict[str, str], schema: Any) -> Any:
    return convert_value(raw, schema)


TAGS = InvokeTags(
    invoke="<invoke",
    invoke_close="</invoke>",
    parameter="<parameter",
    parameter_close="</parameter>",
    value=_typed,
)


def minimax_section_end() -> ValueSkippingEnd:
    return TAGS.section_end((SECTION_CLOSE,))


def decode_minimax(block: str, schemas: Schemas) -> list[Call] | None:
    """The calls of a section, or ``None`` when it is not well-formed."""
    return decode_invokes(block, schemas, TAGS)


FORMAT = Format(
    name="minimax_m2",
    template_markers=(SECTION_OPEN, '<invoke name="'),
    calls=TagCalls(
        opens=(SECTION_OPEN,),
        close=SECTION_CLOSE,
        block_end=minimax_section_end,
        decode=decode_minimax,
        end_reasoning=True,
    ),
    special_tokens=(SECTION_OPEN, SECTION_CLOSE, "<think>", "</think>"),
)
