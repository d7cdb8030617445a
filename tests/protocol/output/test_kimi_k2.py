"""Kimi K2 answers as the model writes them (its chat templates render calls the same way)."""

from __future__ import annotations

from app.protocol.output import FORMATS, ChoiceParser, ParsedOutput, ToolCall, detect
from tests.protocol.output.helpers import make_parser, parsed, stream
from tests.protocol.output.splits import assert_calls_sent_as_they_end, assert_every_split

BEGIN, END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL, ARGS, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def kimi(*, reasoning: bool = True) -> ChoiceParser:
    return make_parser(reasoning=reasoning, tool_format="kimi_k2")


def test_thinking_content_and_one_call() -> None:
    text = (
        "<think>The user wants the weather; I'll call the tool.</think>"
        "Let me check."
        f'{BEGIN}{CALL}functions.get_weather:0{ARGS}{{"city": "Beijing"}}{CALL_END}{END}'
    )
    assert_every_split(
        kimi,
        text,
        ParsedOutput(
            content="Let me check.",
            reasoning_content="The user wants the weather; I'll call the tool.",
            tool_calls=[ToolCall("call_0000", "get_weather", '{"city": "Beijing"}')],
        ),
    )


def test_a_section_opened_inside_reasoning_ends_it() -> None:
    """The model went on to its calls without ``</think>``; vLLM reads Kimi K2 so too."""
    text = (
        f"<think>I need the weather.{BEGIN}{CALL}functions.get_weather:0{ARGS}{{}}{CALL_END}{END}"
    )
    assert_every_split(kimi, text, ParsedOutput(None, "I need the weather.", [
        ToolCall("call_0000", "get_weather", "{}")
    ]))  # fmt: skip


def test_several_calls_in_one_section_with_newlines() -> None:
    text = (
        f"{BEGIN}\n"
        f'{CALL}functions.read_file:3\n{ARGS}{{"path": "app/main.py"}}{CALL_END}\n'
        f"{CALL}functions.run_tests:4{ARGS} {{}} {CALL_END}\n"
        f"{CALL}functions.grep:5{ARGS}{CALL_END}\n"
        f"{END}"
    )
    parser = kimi(reasoning=False)
    assert_every_split(
        lambda: kimi(reasoning=False),
        text,
        ParsedOutput(
            content=None,
            reasoning_content=None,
            tool_calls=[
                ToolCall("call_0000", "read_file", '{"path": "app/main.py"}'),
                ToolCall("call_0001", "run_tests", "{}"),
                ToolCall("call_0002", "grep", "{}"),
            ],
        ),
    )
    parser.parse(text)
    assert parser.finish_reason("stop") == "tool_calls"


def test_nested_arguments_are_kept_as_written() -> None:
    arguments = '{"edits":[{"path":"a.py","range":{"start":3,"end":4}}],\n "dry_run":false}'
    text = f"{BEGIN}{CALL}functions.apply_edits:0{ARGS}{arguments}{CALL_END}{END}"
    out = kimi().parse(text)
    assert out.tool_calls == [ToolCall("call_0000", "apply_edits", arguments)]


def test_markers_inside_a_json_string_are_text() -> None:
    arguments = f'{{"code": "print(\\"{CALL_END}{END}\\")", "note": "{CALL}{ARGS}"}}'
    text = f"{BEGIN}{CALL}functions.write:0{ARGS}{arguments}{CALL_END}{END}"
    assert_every_split(
        kimi,
        text,
        ParsedOutput(None, None, [ToolCall("call_0000", "write", arguments)]),
    )


def test_a_truncated_section_is_text() -> None:
    text = f'Checking.{BEGIN}{CALL}functions.get_weather:0{ARGS}{{"city": "Bei'
    parser = kimi()
    out = parsed(stream(parser, [text[:20], text[20:]]))
    assert out == ParsedOutput(content=text, reasoning_content=None, tool_calls=[])
    assert parser.finish_reason("length") == "length"


def test_a_malformed_call_makes_its_section_text() -> None:
    bad_json = f"{BEGIN}{CALL}functions.get_weather:0{ARGS}{{city: Paris}}{CALL_END}{END}"
    no_index = f"{BEGIN}{CALL}functions.get_weather{ARGS}{{}}{CALL_END}{END}"
    stray_text = f"{BEGIN}I will call{CALL}functions.f:0{ARGS}{{}}{CALL_END}{END}"
    for text in (bad_json, no_index, stray_text):
        assert kimi().parse(text) == ParsedOutput(text, None, []), text


def test_each_call_is_sent_when_its_own_end_arrives() -> None:
    """Not when the section closes: a client sees (and may start) each call as soon as the
    model has finished writing it."""
    first = f'{CALL}functions.read_file:0{ARGS}{{"path": "a.py"}}{CALL_END}'
    second = f'\n{CALL}functions.grep:1{ARGS}{{"pattern": "{CALL_END}"}}{CALL_END}'
    text = f"Reading.{BEGIN}{first}{second}\n{END}Done."
    ends = [len(f"Reading.{BEGIN}{first}"), len(f"Reading.{BEGIN}{first}{second}")]
    assert_calls_sent_as_they_end(kimi, text, ends)
    assert_every_split(kimi, text, ParsedOutput("Reading.Done.", None, [
        ToolCall("call_0000", "read_file", '{"path": "a.py"}'),
        ToolCall("call_0001", "grep", f'{{"pattern": "{CALL_END}"}}'),
    ]))  # fmt: skip


def test_a_malformed_call_after_a_sent_one_is_text_with_the_rest_of_its_section() -> None:
    """The first call went out at its end and cannot be taken back; the malformed one and
    what follows it in the section are content, not dropped."""
    good = f"{CALL}functions.f:0{ARGS}{{}}{CALL_END}"
    bad = f"{CALL}functions.g:1{ARGS}{{oops}}{CALL_END}"
    later = f"{CALL}functions.h:2{ARGS}{{}}{CALL_END}"
    text = f"{BEGIN}{good}\n{bad}{later}{END}Then."
    assert_calls_sent_as_they_end(kimi, text, [len(BEGIN + good)])
    assert_every_split(kimi, text, ParsedOutput(f"\n{bad}{later}{END}Then.", None, [
        ToolCall("call_0000", "f", "{}")
    ]))  # fmt: skip


def test_a_section_cut_off_after_a_sent_call_keeps_the_call() -> None:
    good = f'{CALL}functions.f:0{ARGS}{{"a": [1]}}{CALL_END}'
    truncated = f'{CALL}functions.g:1{ARGS}{{"b": "{END}'
    text = f"{BEGIN}{good}{truncated}"
    assert_every_split(kimi, text, ParsedOutput(truncated, None, [
        ToolCall("call_0000", "f", '{"a": [1]}')
    ]))  # fmt: skip
    assert_every_split(kimi, f"{BEGIN}{good}\n", ParsedOutput(None, None, [
        ToolCall("call_0000", "f", '{"a": [1]}')
    ]))  # fmt: skip


def test_a_last_call_without_its_end_marker_ends_at_the_section_end() -> None:
    """As vLLM reads it: the section's end closes the call written last."""
    text = f"{BEGIN}{CALL}functions.f:0{ARGS}{{}}{CALL_END}{CALL}functions.g:1{ARGS}{{}}{END}"
    assert_every_split(kimi, text, ParsedOutput(None, None, [
        ToolCall("call_0000", "f", "{}"), ToolCall("call_0001", "g", "{}")
    ]))  # fmt: skip


def test_text_after_the_section_is_content() -> None:
    text = f"{BEGIN}{CALL}functions.f:0{ARGS}{{}}{CALL_END}{END}\n\nDone."
    out = kimi().parse(text)
    assert out.content == "\n\nDone."
    assert [call.name for call in out.tool_calls] == ["f"]


def test_tool_call_deltas_in_openai_form() -> None:
    text = f'{BEGIN}{CALL}functions.f:0{ARGS}{{"a": 1}}{CALL_END}{CALL}functions.g:1{ARGS}{{}}'
    deltas = [d.to_openai() for d in stream(kimi(), [text, CALL_END + END])]
    assert deltas == [
        {"tool_calls": [{"index": 0, "id": "call_0000", "type": "function",
                         "function": {"name": "f", "arguments": '{"a": 1}'}}]},
        {"tool_calls": [{"index": 1, "id": "call_0001", "type": "function",
                         "function": {"name": "g", "arguments": "{}"}}]},
    ]  # fmt: skip


def test_the_format_asks_for_special_tokens_and_is_found_in_its_template() -> None:
    assert FORMATS["kimi_k2"].special_tokens
    template = (
        "<|tool_calls_section_begin|>{%- for tool_call in message['tool_calls'] -%}"
        "<|tool_call_begin|>{{ formatted_id }}<|tool_call_argument_begin|>"
    )
    assert detect([template]) == "kimi_k2"
