"""DeepSeek V3.1 answers as the model writes them (its chat template renders calls so)."""

from __future__ import annotations

from app.protocol.output import FORMATS, ChoiceParser, ParsedOutput, ToolCall, detect
from tests.protocol.output.helpers import make_parser
from tests.protocol.output.splits import assert_calls_sent_as_they_end, assert_every_split

BEGIN, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL, SEP, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"


def deepseek(*, thinking: bool = False) -> ChoiceParser:
    """With thinking on, the chat template ends the prompt with ``<think>``."""
    return make_parser(reasoning=True, tool_format="deepseek_v31", starts_in_reasoning=thinking)


def test_thinking_opened_by_the_prompt_then_a_call() -> None:
    text = (
        "The user wants Hangzhou's weather.</think>I'll look it up."
        f'{BEGIN}{CALL}get_weather{SEP}{{"location": "杭州"}}{CALL_END}{END}'
    )
    assert_every_split(
        lambda: deepseek(thinking=True),
        text,
        ParsedOutput(
            content="I'll look it up.",
            reasoning_content="The user wants Hangzhou's weather.",
            tool_calls=[ToolCall("call_0000", "get_weather", '{"location": "杭州"}')],
        ),
    )


def test_several_calls_without_thinking() -> None:
    text = (
        f'{BEGIN}{CALL}read_file{SEP}{{"path": "a.py"}}{CALL_END}'
        f'{CALL}read_file{SEP}{{"path": "b.py"}}{CALL_END}{END}'
    )
    assert_every_split(
        deepseek,
        text,
        ParsedOutput(
            None,
            None,
            [
                ToolCall("call_0000", "read_file", '{"path": "a.py"}'),
                ToolCall("call_0001", "read_file", '{"path": "b.py"}'),
            ],
        ),
    )


def test_each_call_is_sent_when_its_own_end_arrives() -> None:
    first = f'{CALL}read_file{SEP}{{"path": "a.py"}}{CALL_END}'
    second = f'{CALL}apply_patch{SEP}{{"lines": ["{CALL_END}{END}"]}}{CALL_END}'
    text = f"The user wants a fix.</think>{BEGIN}{first}{second}{END}"
    head = f"The user wants a fix.</think>{BEGIN}{first}"
    assert_calls_sent_as_they_end(
        lambda: deepseek(thinking=True), text, [len(head), len(head + second)]
    )
    assert_every_split(lambda: deepseek(thinking=True), text, ParsedOutput(
        None,
        "The user wants a fix.",
        [
            ToolCall("call_0000", "read_file", '{"path": "a.py"}'),
            ToolCall("call_0001", "apply_patch", f'{{"lines": ["{CALL_END}{END}"]}}'),
        ],
    ))  # fmt: skip


def test_a_malformed_call_after_a_sent_one_is_text_with_the_rest_of_its_section() -> None:
    good = f"{CALL}f{SEP}{{}}{CALL_END}"
    bad = f"{CALL}get weather{SEP}{{}}{CALL_END}"
    text = f"{BEGIN}{good}{bad}{good}{END}"
    assert_calls_sent_as_they_end(deepseek, text, [len(BEGIN + good)])
    assert_every_split(deepseek, text, ParsedOutput(f"{bad}{good}{END}", None, [
        ToolCall("call_0000", "f", "{}")
    ]))  # fmt: skip


def test_text_after_the_section_is_content() -> None:
    text = f"{BEGIN}{CALL}f{SEP}{{}}{CALL_END}{END}Waiting for the result."
    assert_every_split(deepseek, text, ParsedOutput("Waiting for the result.", None, [
        ToolCall("call_0000", "f", "{}")
    ]))  # fmt: skip


def test_nested_arguments_and_markers_in_strings() -> None:
    arguments = (
        '{"patch": {"file": "x.md", "lines": ["' + CALL_END + END + '", "' + SEP + '"]}, "n": 2}'
    )
    text = f"{BEGIN}{CALL}apply_patch{SEP}{arguments}{CALL_END}{END}"
    assert_every_split(deepseek, text, ParsedOutput(None, None, [
        ToolCall("call_0000", "apply_patch", arguments)
    ]))  # fmt: skip


def test_a_truncated_call_is_text() -> None:
    text = f'Sure.{BEGIN}{CALL}get_weather{SEP}{{"location": "Ha'
    parser = deepseek()
    assert parser.parse(text) == ParsedOutput(text, None, [])
    assert parser.finish_reason("length") == "length"


def test_a_malformed_call_is_text() -> None:
    spaced_name = f"{BEGIN}{CALL}get weather{SEP}{{}}{CALL_END}{END}"
    not_an_object = f'{BEGIN}{CALL}f{SEP}["a"]{CALL_END}{END}'
    no_separator = f"{BEGIN}{CALL}f{{}}{CALL_END}{END}"
    for text in (spaced_name, not_an_object, no_separator):
        assert deepseek().parse(text) == ParsedOutput(text, None, []), text


def test_reasoning_cut_off_is_all_reasoning() -> None:
    assert deepseek(thinking=True).parse("Still thinking") == ParsedOutput(
        None, "Still thinking", []
    )


def test_the_format_asks_for_special_tokens_and_is_found_in_its_template() -> None:
    assert FORMATS["deepseek_v31"].special_tokens
    template = (
        "{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + "
        "'<｜tool▁sep｜>' + tool['function']['arguments'] | tojson + '<｜tool▁call▁end｜>'}}"
    )
    assert detect([template]) == "deepseek_v31"
