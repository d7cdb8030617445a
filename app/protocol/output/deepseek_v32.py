"""DeepSeek V3.2 and V4 tool calls ("DSML"): invokes whose parameters say if they are strings.

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

V4 writes the same section as ``<｜DSML｜tool_calls>`` … ``</｜DSML｜tool_calls>``: both are
read. A ``string="true"`` value is verbatim; any other is JSON, or, when it does not parse,
typed by the tool's JSON schema like a bare value. ``｜DSML｜`` is an ordinary added token (not
special), so the markers survive an upstream that skips special tokens. Reasoning is in
``<think>``, which the prompt opens in thinking mode.
"""

from __future__ import annotations

from typing import Any

from app.protocol.output.interface import Call, Format, Schemas, TagCalls
from app.protocol.output.invokes import InvokeTags, decode_invokes
from app.protocol.output.scanning import ValueSkippingEnd
from app.protocol.output.schema import convert_value, loads_strict

DSML = "｜DSML｜"
V32_SECTION = (f"<{DSML}function_calls>", f"</{DSML}function_calls>")
V4_SECTION = (f"<{DSML}tool_calls>", f"</{DSML}tool_calls>")
SECTIONS = (V32_SECTION, V4_SECTION)
CLOSES = tuple(close for _, close in SECTIONS)


def _typed(raw: str, attributes: dict[str, str], schema: Any) -> Any:
    if attributes.get("string") == "true":
        return raw
    try:
        return loads_strict(raw)
    except ValueError:
        return convert_value(raw, schema)


TAGS = InvokeTags(
    invoke=f"<{DSML}invoke",
    invoke_close=f"</{DSML}invoke>",
    parameter=f"<{DSML}parameter",
    parameter_close=f"</{DSML}parameter>",
    value=_typed,
)


def dsml_section_end() -> ValueSkippingEnd:
    return TAGS.section_end(CLOSES)


def decode_dsml(block: str, schemas: Schemas) -> list[Call] | None:
    """The calls of a section, or ``None`` when it is not well-formed."""
    return decode_invokes(block, schemas, TAGS)


FORMAT = Format(
    name="deepseek_v32",
    template_markers=(DSML, 'invoke name="'),
    calls=TagCalls(
        opens=tuple(opening for opening, _ in SECTIONS),
        close=CLOSES[0],
        other_closes=CLOSES[1:],
        block_end=dsml_section_end,
        decode=decode_dsml,
        end_reasoning=True,
    ),
)
