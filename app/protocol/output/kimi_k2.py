"""Kimi K2 tool calls: a section of special-token markers, each call named by its native id.

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

The header is ``functions.<name>:<n>``, ``n`` counting the calls of the conversation (Kimi's
chat templates rebuild it from the name and their own counter, so the id the client gets back
need not be it). Every marker is a special token: the upstream must keep special tokens in
its output text. Reasoning is ``<think>``...``</think>``; a section that opens before
``</think>`` ends the reasoning (as vLLM reads Kimi K2).
"""

from __future__ import annotations

import re

from app.protocol.output.marker_sections import SectionMarkers, section_format

MARKERS = SectionMarkers(
    begin="<|tool_calls_section_begin|>",
    end="<|tool_calls_section_end|>",
    call_begin="<|tool_call_begin|>",
    args_begin="<|tool_call_argument_begin|>",
    call_end="<|tool_call_end|>",
)

_HEADER = re.compile(r"(?:functions\.)?([^\s:]+):\d+")


def name_of_header(header: str) -> str | None:
    """``get_weather`` from ``functions.get_weather:0``; ``None`` for any other header."""
    match = _HEADER.fullmatch(header.strip())
    return match.group(1) if match else None


FORMAT = section_format("kimi_k2", MARKERS, name_of_header, end_reasoning=True)
