"""Shared by the output-parser tests: deterministic ids, streaming, and a lossless rendering."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from app.generation import ToolFormat
from app.protocol.output import ChatDelta, ChoiceParser, ParsedOutput, output_parser

MARKUP = re.compile(r"\s|<think>|</think>|<tool_call>|</tool_call>")

HARMONY_MARKERS = (
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|channel|>",
    "<|constrain|>",
    "<|return|>",
    "<|call|>",
    "<|endoftext|>",
)
"""gpt-oss's harmony markers and its end of text, spelled out here rather than taken from
the parser under test."""


def counting_ids() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"call_{next(counter):04x}"


def one_tool(name: str, **properties: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's ``tools``: the function ``name``, its parameters ``properties`` (each a
    parameter's name and JSON schema)."""
    parameters = {"type": "object", "properties": properties}
    return [{"type": "function", "function": {"name": name, "parameters": parameters}}]


def make_parser(
    *,
    reasoning: bool,
    tool_format: ToolFormat | None,
    tools: list[dict[str, Any]] | None = None,
    starts_in_reasoning: bool = False,
) -> ChoiceParser:
    return output_parser(
        tool_format,
        reasoning=reasoning,
        tools=tools,
        starts_in_reasoning=starts_in_reasoning,
        id_factory=counting_ids(),
    )


def split_at(text: str, cuts: Sequence[int]) -> list[str]:
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def stream(parser: ChoiceParser, chunks: Sequence[str]) -> list[ChatDelta]:
    deltas: list[ChatDelta] = []
    for chunk in chunks:
        deltas.extend(parser.feed(chunk))
    deltas.extend(parser.finish())
    return deltas


def render(deltas: Sequence[ChatDelta], tool_format: ToolFormat | None) -> str:
    """The deltas written back as model text (tool calls in the given format, canonical JSON)."""
    parts: list[str] = []
    for delta in deltas:
        if delta.tool_call is None:
            parts.append(delta.content or delta.reasoning_content or "")
            continue
        name, arguments = delta.tool_call.name, json.loads(delta.tool_call.arguments)
        if tool_format == "hermes":
            call = {"name": name, "arguments": arguments}
            parts.append(f"<tool_call>{json.dumps(call, ensure_ascii=False)}</tool_call>")
        else:
            params = "".join(
                f"<parameter={key}>"
                f"{value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
                "</parameter>"
                for key, value in arguments.items()
            )
            parts.append(f"<tool_call><function={name}>{params}</function></tool_call>")
    return "".join(parts)


def squash(text: str) -> str:
    """Text without whitespace and the reasoning/tool-call tags: what must survive parsing."""
    return MARKUP.sub("", text)


def parsed(deltas: Sequence[ChatDelta]) -> ParsedOutput:
    return ParsedOutput.from_deltas(deltas)
