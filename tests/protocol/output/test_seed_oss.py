"""Seed-OSS answers as the model writes them: ``<seed:think>`` reasoning and Qwen3-Coder's
function tags inside ``<seed:tool_call>`` (as its chat template renders them)."""

from __future__ import annotations

import ast
import json
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.protocol.output import ChoiceParser, ParsedOutput, ToolCall
from tests.protocol.output.helpers import make_parser, one_tool, parsed, stream
from tests.protocol.output.splits import assert_every_split

TOOLS = one_tool("run", cmd={"type": "string"}, timeout={"type": "number"})


def seed(**options: Any) -> ChoiceParser:
    return make_parser(tool_format="seed_oss", **{"reasoning": True, "tools": TOOLS, **options})


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


EDIT_TOOLS = one_tool(
    "edit",
    hunks={"type": "array"},
    options={"type": "object"},
    meta={"anyOf": [{"type": "object"}, {"type": "null"}]},
    path={"type": "string"},
)


def edit_call(**values: str) -> str:
    return call("edit", "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in values.items()))


def test_values_written_in_pythons_str_are_typed_by_the_schema() -> None:
    """Seed-OSS's template writes a value that is not a string with Python's ``str``, and so
    does the model. vLLM's Seed-OSS parser reads an object as JSON, else with
    ``ast.literal_eval``, and an array with ``ast.literal_eval``: the same values here."""
    text = edit_call(
        hunks="[{'at': 3, 'text': 'x = \"y\"\\n'}, {'at': -9, 'text': None}]",
        options="{'dry_run': True, 'ratio': 0.5, 'tags': ('a', 'b')}",
        meta="None",
        path="{'not': 'parsed'}",
    )
    out = seed(tools=EDIT_TOOLS).parse(text)
    assert json.loads(out.tool_calls[0].arguments) == {
        "hunks": [{"at": 3, "text": 'x = "y"\n'}, {"at": -9, "text": None}],
        "options": {"dry_run": True, "ratio": 0.5, "tags": ["a", "b"]},
        "meta": None,
        "path": "{'not': 'parsed'}",
    }


def test_json_is_still_read_and_what_is_no_literal_stays_text() -> None:
    """JSON first (``true`` and ``null`` inside an array too); text that is no literal (a
    call, a name, a key that is not a string, a key twice) is the raw string, never
    evaluated."""
    text = edit_call(
        hunks='[true, null, {"a": 1}]',
        options="{'a': __import__('os').getcwd()}",
        meta="{1: 'one'}",
    )
    out = seed(tools=EDIT_TOOLS).parse(text)
    assert json.loads(out.tool_calls[0].arguments) == {
        "hunks": [True, None, {"a": 1}],
        "options": "{'a': __import__('os').getcwd()}",
        "meta": "{1: 'one'}",
    }
    twice = seed(tools=EDIT_TOOLS).parse(edit_call(options="{'a': 1, 'a': 2}"))
    assert json.loads(twice.tool_calls[0].arguments) == {"options": "{'a': 1, 'a': 2}"}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.sampled_from("ab é'\"\\\n{}[]😀"), max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(st.sampled_from("ab'\"é"), max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(hunks=st.lists(json_values, max_size=4), options=st.dictionaries(st.text(), json_values))
def test_any_value_the_template_writes_comes_back(hunks: list[Any], options: Any) -> None:
    """What the template writes (``str`` of the value, as ``arg_value | string`` renders it)
    parses back to the value, in every chunking; ``ast.literal_eval`` (vLLM's reading) agrees."""
    assume(not any(tag in str(options) for tag in ("</parameter>", "<parameter=", "</function>")))
    text = edit_call(hunks=str(hunks), options=str(options))
    assert ast.literal_eval(str(hunks)) == hunks
    out = seed(tools=EDIT_TOOLS).parse(text)
    assert json.loads(out.tool_calls[0].arguments) == {"hunks": hunks, "options": options}
    assert parsed(stream(seed(tools=EDIT_TOOLS), list(text))) == out
