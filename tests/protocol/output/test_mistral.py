"""Mistral answers as the models write them: Devstral / Mistral Small 3.x (``[ARGS]``), Small
3.2 (``[CALL_ID]``), Magistral (``[THINK]``), and the older JSON-array form (Nemo)."""

from __future__ import annotations

import re

from app.protocol.output import FORMATS, ChoiceParser, ParsedOutput, ToolCall, detect, output_parser
from tests.protocol.output.helpers import make_parser
from tests.protocol.output.splits import assert_every_split


def mistral(*, reasoning: bool = False) -> ChoiceParser:
    return make_parser(reasoning=reasoning, tool_format="mistral")


def test_devstral_one_call() -> None:
    text = '[TOOL_CALLS]read_file[ARGS]{"path": "src/main.py"}'
    assert_every_split(
        mistral, text, ParsedOutput(None, None, [
            ToolCall("call_0000", "read_file", '{"path": "src/main.py"}')
        ]),
    )  # fmt: skip


def test_parallel_calls_and_content_before_them() -> None:
    text = (
        "Let me look at both files."
        '[TOOL_CALLS]read_file[ARGS]{"path": "a.py"}'
        '[TOOL_CALLS]read_file[ARGS]{"path": "b.py", "lines": [1, 20]}'
    )
    assert_every_split(
        mistral,
        text,
        ParsedOutput(
            "Let me look at both files.",
            None,
            [
                ToolCall("call_0000", "read_file", '{"path": "a.py"}'),
                ToolCall("call_0001", "read_file", '{"path": "b.py", "lines": [1, 20]}'),
            ],
        ),
    )


def test_small_3_2_call_ids_are_read_past() -> None:
    text = '[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris"}'
    assert_every_split(mistral, text, ParsedOutput(None, None, [
        ToolCall("call_0000", "get_weather", '{"city": "Paris"}')
    ]))  # fmt: skip


def test_the_older_json_array() -> None:
    text = (
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"},'
        ' {"name": "get_time", "arguments": {}}]'
    )
    assert_every_split(
        mistral,
        text,
        ParsedOutput(
            None,
            None,
            [
                ToolCall("call_0000", "get_weather", '{"city": "Paris"}'),
                ToolCall("call_0001", "get_time", "{}"),
            ],
        ),
    )


def test_magistral_reasoning_then_a_call() -> None:
    text = (
        '[THINK]I need the file first.[/THINK]Reading it.[TOOL_CALLS]read_file[ARGS]{"path": "x"}'
    )
    assert_every_split(
        lambda: mistral(reasoning=True),
        text,
        ParsedOutput(
            "Reading it.",
            "I need the file first.",
            [ToolCall("call_0000", "read_file", '{"path": "x"}')],
        ),
    )


def test_a_call_written_inside_reasoning_ends_it() -> None:
    """Magistral went on to its call without ``[/THINK]``; vLLM reads Mistral so too."""
    text = '[THINK]I need the file first.[TOOL_CALLS]read_file[ARGS]{"path": "x"}'
    assert_every_split(lambda: mistral(reasoning=True), text, ParsedOutput(
        None, "I need the file first.", [ToolCall("call_0000", "read_file", '{"path": "x"}')]
    ))  # fmt: skip


def test_nested_arguments_and_markers_in_strings() -> None:
    arguments = '{"cmd": "echo \\"[TOOL_CALLS]x[ARGS]{}\\"", "env": {"A": {"B": [1, {"C": "}"}]}}}'
    text = f"[TOOL_CALLS]run[ARGS]{arguments}"
    assert_every_split(
        mistral, text, ParsedOutput(None, None, [ToolCall("call_0000", "run", arguments)])
    )


def test_whitespace_around_the_arguments() -> None:
    text = '\n[TOOL_CALLS]f[ARGS] {"a": 1}\n'
    assert_every_split(mistral, text, ParsedOutput(None, None, [
        ToolCall("call_0000", "f", '{"a": 1}')
    ]))  # fmt: skip


def test_text_after_a_call_is_content() -> None:
    """vLLM drops it; it is the model's output, so it is kept."""
    text = '[TOOL_CALLS]f[ARGS]{"a": 1} and then some text'
    assert_every_split(mistral, text, ParsedOutput(" and then some text", None, [
        ToolCall("call_0000", "f", '{"a": 1}')
    ]))  # fmt: skip


def test_a_truncated_call_is_text() -> None:
    text = 'Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "Par'
    parser = mistral()
    assert_every_split(mistral, text, ParsedOutput(text, None, []))
    parser.parse(text)
    assert parser.finish_reason("length") == "length"


def test_malformed_calls_are_text() -> None:
    for text in (
        "[TOOL_CALLS]f[ARGS]not json",
        '[TOOL_CALLS]f[ARGS]["a list"]',
        "[TOOL_CALLS] I cannot call tools.",
        "[TOOL_CALLS]f[ARGS]g{}",
        "[TOOL_CALLS]f [ARGS]{}",
        '[TOOL_CALLS][{"name": "f"}, {"arguments": {}}]',
    ):
        assert mistral().parse(text) == ParsedOutput(text, None, []), text


def test_ids_are_nine_letters_and_digits_as_mistral_templates_require() -> None:
    text = "[TOOL_CALLS]f[ARGS]{}[TOOL_CALLS]g[ARGS]{}"
    out = output_parser("mistral", reasoning=False, tools=None).parse(text)
    assert [call.name for call in out.tool_calls] == ["f", "g"]
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", call.id) for call in out.tool_calls)


def test_the_format_asks_for_special_tokens_and_is_found_in_its_template() -> None:
    assert FORMATS["mistral"].special_tokens
    template = "{{- '[TOOL_CALLS]' + tool_call.function.name }}{{- '[ARGS]' + arguments }}"
    assert detect([template]) == "mistral"
