"""Seed-OSS answers as the model writes them: ``<seed:think>`` reasoning and Qwen3-Coder's
function tags inside ``<seed:tool_call>`` (as its chat template renders them)."""

from __future__ import annotations

from typing import Any

from app.protocol.output import ChoiceParser, ParsedOutput, ToolCall
from tests.protocol.output.helpers import make_parser, one_tool, parsed, stream
from tests.protocol.output.splits import assert_every_split

TOOLS = one_tool("run", cmd={"type": "string"}, timeout={"type": "number"})


def seed(**options: Any) -> ChoiceParser:
    return make_parser(tool_format="seed_oss", tools=TOOLS, **{"reasoning": True, **options})


def call(name: str, parameters: str) -> str:
    return f"<seed:tool_call>\n<function={name}>\n{parameters}</function>\n</seed:tool_call>"


def test_reasoning_content_and_two_calls() -> None:
    text = (
        "<seed:think>Run the tests, then lint.</seed:think>On it.\n"
        + call("run", "<parameter=cmd>pytest -q</parameter>\n<parameter=timeout>2.5</parameter>\n")
        + "\n"
        + call("run", "<parameter=cmd>ruff check</parameter>\n")
    )
    assert_every_split(
        seed,
        text,
        ParsedOutput(
            content="On it.\n",
            reasoning_content="Run the tests, then lint.",
            tool_calls=[
                ToolCall("call_0000", "run", '{"cmd": "pytest -q", "timeout": 2.5}'),
                ToolCall("call_0001", "run", '{"cmd": "ruff check"}'),
            ],
        ),
    )


def test_think_tags_of_other_families_are_content() -> None:
    text = "<think>not Seed's</think>hi"
    assert seed().parse(text) == ParsedOutput(text, None, [])


def test_markers_inside_a_value_are_text() -> None:
    code = "echo '</seed:tool_call>' </function>"
    text = call("run", f"<parameter=cmd>{code}</parameter>\n")
    out = seed().parse(text)
    assert out.tool_calls == [
        ToolCall("call_0000", "run", '{"cmd": "echo \'</seed:tool_call>\' </function>"}')
    ]


def test_a_truncated_call_and_a_malformed_one_are_text() -> None:
    truncated = "<seed:tool_call>\n<function=run>\n<parameter=cmd>py"
    parser = seed()
    assert parsed(stream(parser, [truncated[:20], truncated[20:]])) == ParsedOutput(
        truncated, None, []
    )
    assert parser.finish_reason("length") == "length"
    malformed = '<seed:tool_call>{"name": "run"}</seed:tool_call>'
    assert seed().parse(malformed) == ParsedOutput(malformed, None, [])


def test_reasoning_cut_off_is_all_reasoning() -> None:
    assert seed().parse("<seed:think>still thinking") == ParsedOutput(None, "still thinking", [])
