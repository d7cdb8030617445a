"""Every tool-call format by name, the choice parser for one, and ``auto``'s detection.

A new format is a module holding one ``interface.Format`` value (``FORMAT``) and one line in
``FORMATS`` below; the service only ever calls ``output_parser``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from app.generation import ToolFormat
from app.protocol.output import (
    deepseek_v31,
    deepseek_v32,
    gemma4,
    glm,
    harmony,
    hermes,
    kimi_k2,
    llama3_json,
    minimax_m2,
    mistral,
    pythonic,
    qwen3_coder,
    seed_oss,
)
from app.protocol.output.interface import THINK, ChoiceParser, Format, ParserOptions, Reasoning
from app.protocol.output.parser import OutputParser, new_tool_call_id

FORMATS: dict[ToolFormat, Format] = {
    fmt.name: fmt
    for fmt in (
        hermes.FORMAT,
        qwen3_coder.FORMAT,
        kimi_k2.FORMAT,
        deepseek_v31.FORMAT,
        mistral.FORMAT,
        llama3_json.FORMAT,
        pythonic.FORMAT,
        glm.GLM45,
        glm.GLM47,
        minimax_m2.FORMAT,
        seed_oss.FORMAT,
        deepseek_v32.FORMAT,
        gemma4.FORMAT,
        harmony.FORMAT,
    )
}
"""The formats the proxy parses, by ``--tool-format`` name."""

FALLBACK: ToolFormat = "hermes"
"""What ``auto`` picks for a template that shows no known format's markers."""


def output_parser(
    tool_format: ToolFormat | None,
    *,
    reasoning: bool,
    tools: list[dict[str, Any]] | None,
    tool_calls: bool = True,
    starts_in_reasoning: bool = False,
    id_factory: Callable[[], str] | None = None,
) -> ChoiceParser:
    """The parser of one generated choice: ``tool_format``'s, reading tool calls when
    ``tool_calls`` (the service: when the request sent tools); ``tool_format`` None reads
    ``<think>`` reasoning only. Tool-call ids come from ``id_factory``, else the format's
    ``call_id``, else ``new_tool_call_id``."""
    fmt = None if tool_format is None else FORMATS[tool_format]
    options = ParserOptions(
        reasoning=reasoning,
        tools=tools,
        tool_calls=tool_calls,
        starts_in_reasoning=starts_in_reasoning,
        id_factory=id_factory or (fmt and fmt.call_id) or new_tool_call_id,
    )
    if fmt is None:
        return OutputParser(options, calls=None)
    if fmt.parser is not None:
        return fmt.parser(options)
    return OutputParser(options, calls=fmt.calls if tool_calls else None, markers=fmt.reasoning)


def reasoning_markers(tool_format: ToolFormat | None) -> Reasoning | None:
    """The reasoning markers the model of ``tool_format`` writes (``<think>`` for none)."""
    return THINK if tool_format is None else FORMATS[tool_format].reasoning


def detect(template_sources: Iterable[str]) -> ToolFormat | None:
    """The format a chat template teaches: among the formats whose ``template_markers`` all
    appear in one of its texts, the one with the most markers (the first registered on a
    tie); None when none does."""
    best: Format | None = None
    for source in template_sources:
        for fmt in FORMATS.values():
            if all(marker in source for marker in fmt.template_markers) and (
                best is None or len(fmt.template_markers) > len(best.template_markers)
            ):
                best = fmt
    return None if best is None else best.name


def resolve(
    setting: ToolFormat | Literal["auto"] | None, template_sources: Iterable[str]
) -> tuple[ToolFormat | None, str]:
    """The format ``--tool-format`` names, and how it was chosen (for the start-up log):
    ``auto`` is the template's (``detect``), or ``FALLBACK`` when it shows none."""
    if setting != "auto":
        return setting, "--tool-format"
    found = detect(template_sources)
    if found is None:
        return FALLBACK, "auto: no known format's markers in the chat template, the default"
    return found, "auto: from the chat template's markers"
