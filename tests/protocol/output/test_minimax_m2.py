"""MiniMax M2 answers as the model writes them (its chat template renders calls the same way:
one section, one invoke per call, a parameter per line)."""

from __future__ import annotations

from typing import Any

import pytest

from app.protocol.output import ChoiceParser, ParsedOutput, ToolCall
from tests.protocol.output.helpers import make_parser, one_tool, parsed, stream
from tests.protocol.output.splits import assert_calls_sent_as_they_end, assert_every_split

TOOLS = one_tool(
    "search",
    query={"type": "string"},
    limit={"type": "integer"},
    filters={"type": "object"},
    exact={"type": "boolean"},
)
OPEN, CLOSE = "<minimax:tool_call>", "</minimax:tool_call>"


def minimax(**options: Any) -> ChoiceParser:
    return make_parser(tool_format="minimax_m2", tools=TOOLS, **{"reasoning": True, **options})


def test_reasoning_opened_by_the_prompt_then_two_calls_in_one_section() -> None:
    """The template's generation prompt ends with ``<think>\\n``."""
    text = (
        "The user wants two searches.\n</think>\n\n"
        f"{OPEN}\n"
        '<invoke name="search">\n<parameter name="query">rust async</parameter>\n'
        '<parameter name="limit">5</parameter>\n<parameter name="exact">true</parameter>\n'
        "</invoke>\n"
        '<invoke name="search">\n<parameter name="filters">{"lang": ["en", "fr"]}</parameter>\n'
        "</invoke>\n"
        f"{CLOSE}"
    )
    assert_every_split(
        lambda: minimax(starts_in_reasoning=True),
        text,
        ParsedOutput(
            content=None,
            reasoning_content="The user wants two searches.\n",
            tool_calls=[
                ToolCall(
                    "call_0000", "search", '{"query": "rust async", "limit": 5, "exact": true}'
                ),
                ToolCall("call_0001", "search", '{"filters": {"lang": ["en", "fr"]}}'),
            ],
        ),
    )


def test_content_around_the_section_and_a_call_without_parameters() -> None:
    text = f'Looking.\n{OPEN}<invoke name="list_files"></invoke>{CLOSE}\nDone.'
    out = minimax().parse(text)
    assert out == ParsedOutput(
        "Looking.\n\nDone.", None, [ToolCall("call_0000", "list_files", "{}")]
    )


def test_values_are_verbatim_and_markers_inside_them_are_text() -> None:
    value = f'  line one\n{CLOSE}</invoke><parameter name="x">  '
    text = (
        f'{OPEN}<invoke name="search"><parameter name="query">{value}</parameter></invoke>{CLOSE}'
    )
    assert_every_split(
        minimax,
        text,
        ParsedOutput(
            None,
            None,
            [
                ToolCall(
                    "call_0000",
                    "search",
                    '{"query": "  line one\\n</minimax:tool_call></invoke>'
                    '<parameter name=\\"x\\">  "}',
                ),
            ],
        ),
    )


def test_single_quoted_names_are_read() -> None:
    text = f"{OPEN}<invoke name='search'><parameter name='limit'>3</parameter></invoke>{CLOSE}"
    assert minimax().parse(text).tool_calls == [ToolCall("call_0000", "search", '{"limit": 3}')]


def test_a_truncated_section_is_text() -> None:
    text = f'Ok.{OPEN}\n<invoke name="search">\n<parameter name="query">ru'
    parser = minimax()
    out = parsed(stream(parser, [text[:9], text[9:]]))
    assert out == ParsedOutput(text, None, [])
    assert parser.finish_reason("length") == "length"


def test_each_invoke_is_sent_when_it_closes() -> None:
    """Not when the section closes; an ``</invoke>`` inside a value is text."""
    first = '\n<invoke name="search">\n<parameter name="query">a</invoke> b</parameter>\n</invoke>'
    second = '\n<invoke name="search">\n<parameter name="limit">3</parameter>\n</invoke>'
    text = f"{OPEN}{first}{second}\n{CLOSE}"
    assert_calls_sent_as_they_end(minimax, text, [len(OPEN + first), len(OPEN + first + second)])
    assert_every_split(minimax, text, ParsedOutput(None, None, [
        ToolCall("call_0000", "search", '{"query": "a</invoke> b"}'),
        ToolCall("call_0001", "search", '{"limit": 3}'),
    ]))  # fmt: skip


def test_a_malformed_invoke_after_a_sent_one_is_text_with_the_rest_of_its_section() -> None:
    text = f'{OPEN}<invoke name="a"></invoke>oops<invoke name="b"></invoke>{CLOSE}Then.'
    assert_calls_sent_as_they_end(minimax, text, [len(f'{OPEN}<invoke name="a"></invoke>')])
    assert_every_split(minimax, text, ParsedOutput(
        f'oops<invoke name="b"></invoke>{CLOSE}Then.', None, [ToolCall("call_0000", "a", "{}")]
    ))  # fmt: skip


@pytest.mark.parametrize(
    "section",
    [
        f'{OPEN}<invoke name="search"><parameter name="query">x</parameter>{CLOSE}',  # no </invoke>
        f'{OPEN}<invoke><parameter name="query">x</parameter></invoke>{CLOSE}',  # no name
        f'{OPEN}I will search <invoke name="search"></invoke>{CLOSE}',  # text in the section
        f'{OPEN}<invoke name="search"><parameter name="q">1</parameter>'
        f'<parameter name="q">2</parameter></invoke>{CLOSE}',  # a parameter twice
        f"{OPEN}\n{CLOSE}",  # no call at all
    ],
)
def test_a_malformed_section_is_text_whole(section: str) -> None:
    assert minimax().parse(section) == ParsedOutput(section, None, [])
