"""DeepSeek V3.1 tool calls: a section of special-token markers, the name before a separator.

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}
    <｜tool▁call▁end｜><｜tool▁calls▁end｜>                      (one line, no newlines)

The markers are special tokens written with fullwidth bars and ``▁``: the upstream must keep
special tokens in its output text. Reasoning is ``<think>``...``</think>``; with thinking on,
the chat template opens ``<think>`` in the prompt, so output starts inside reasoning.
"""

from __future__ import annotations

from app.protocol.output.interface import Call, Format, Schemas, TagCalls
from app.protocol.output.marker_sections import SectionEnd, SectionMarkers, decode_section

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


def deepseek_v31_section_end() -> SectionEnd:
    return SectionEnd(MARKERS)


def decode_deepseek_v31(body: str, schemas: Schemas) -> list[Call] | None:
    """The calls of one section (the text between its begin and end markers); the JSON
    carries its own types, ``schemas`` is not needed."""
    return decode_section(body, MARKERS, function_name)


FORMAT = Format(
    name="deepseek_v31",
    template_markers=(MARKERS.begin, MARKERS.args_begin),
    calls=TagCalls(
        opens=(MARKERS.begin,),
        close=MARKERS.end,
        block_end=deepseek_v31_section_end,
        decode=decode_deepseek_v31,
    ),
    special_tokens=(*MARKERS.all, "<think>", "</think>"),
)
