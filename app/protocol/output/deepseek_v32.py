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

from app.protocol.output.interface import Format
from app.protocol.output.invokes import InvokeTags
from app.protocol.output.schema import convert_value, loads_strict

DSML = "｜DSML｜"
V32_SECTION = (f"<{DSML}function_calls>", f"</{DSML}function_calls>")
V4_SECTION = (f"<{DSML}tool_calls>", f"</{DSML}tool_calls>")
SECTIONS = (V32_SECTION, V4_SECTION)


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


FORMAT = Format(
    name="deepseek_v32",
    template_markers=(DSML, 'invoke name="'),
    calls=TAGS.tag_calls(SECTIONS),
)
