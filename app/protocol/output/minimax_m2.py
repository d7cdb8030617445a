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

from app.protocol.output.interface import Format
from app.protocol.output.invokes import InvokeTags
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


FORMAT = Format(
    name="minimax_m2",
    template_markers=(SECTION_OPEN, '<invoke name="'),
    calls=TAGS.tag_calls([(SECTION_OPEN, SECTION_CLOSE)]),
    special_tokens=(SECTION_OPEN, SECTION_CLOSE, "<think>", "</think>"),
)
