"""DeepSeek V3.1 tool calls: a section of special-token markers, the name before a separator.

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}
    <｜tool▁call▁end｜><｜tool▁calls▁end｜>                      (one line, no newlines)

The markers are special tokens written with fullwidth bars and ``▁``: the upstream must keep
special tokens in its output text. Reasoning is ``<think>``...``</think>``; with thinking on,
the chat template opens ``<think>`` in the prompt, so output starts inside reasoning.
"""

from __future__ import annotations

from app.protocol.output.marker_sections import SectionMarkers, section_format

MARKERS = SectionMarkers(
    begin="<｜tool▁calls▁begin｜>",
    end="<｜tool▁calls▁end｜>",
    call_begin="<｜tool▁call▁begin｜>",
    args_begin="<｜tool▁sep｜>",
    call_end="<｜tool▁call▁end｜>",
)


def function_name(header: str) -> str | None:
    """The name written before the separator; ``None`` if empty or with spaces inside."""
    name = header.strip()
    return name if name and not any(char.isspace() for char in name) else None


FORMAT = section_format("deepseek_v31", MARKERS, function_name)
