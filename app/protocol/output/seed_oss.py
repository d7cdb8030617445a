"""Seed-OSS tool calls: Qwen3-Coder's function and parameter tags in a ``seed:`` wrapper.

    <seed:tool_call>
    <function=get_weather>
    <parameter=city>Paris</parameter>
    </function>
    </seed:tool_call>

One call per block, read as Qwen3-Coder's (``qwen3_coder.decode_qwen3_coder``: one newline on
either side of a value is layout, values typed by the tool's JSON schema), except that
Seed-OSS's chat template writes a value that is not a string with Python's ``str``
(``{'a': True}``, ``None``), so the model writes such values: a parameter whose schema says
object, array or null reads them as Python literals when they are not JSON, as vLLM's
Seed-OSS parser does (never evaluated). Reasoning is in ``<seed:think>`` … ``</seed:think>``.
"""

from __future__ import annotations

from functools import partial

from app.protocol.output.interface import Format, Reasoning, TagCalls
from app.protocol.output.qwen3_coder import (
    FUNCTION_OPEN,
    PARAMETER_OPEN,
    coder_block_end,
    decode_qwen3_coder,
)
from app.protocol.output.scanning import ValueSkippingEnd

TOOL_CALL_OPEN = "<seed:tool_call>"
TOOL_CALL_CLOSE = "</seed:tool_call>"
SEED_THINK = Reasoning("<seed:think>", "</seed:think>")


def seed_block_end() -> ValueSkippingEnd:
    return coder_block_end(TOOL_CALL_CLOSE)


FORMAT = Format(
    name="seed_oss",
    template_markers=(TOOL_CALL_OPEN, FUNCTION_OPEN, PARAMETER_OPEN),
    reasoning=SEED_THINK,
    calls=TagCalls(
        opens=(TOOL_CALL_OPEN,),
        close=TOOL_CALL_CLOSE,
        block_end=seed_block_end,
        decode=partial(decode_qwen3_coder, python=True),
        end_reasoning=True,
    ),
    special_tokens=(TOOL_CALL_OPEN, TOOL_CALL_CLOSE, SEED_THINK.open, SEED_THINK.close),
)
