"""Streaming checks shared by the per-format parser tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.protocol.output import ChoiceParser, ParsedOutput
from tests.protocol.output.helpers import parsed, stream


def assert_every_split(new: Callable[[], ChoiceParser], text: str, expected: ParsedOutput) -> None:
    """``text`` gives ``expected`` whole, cut in two at every position, and one character at
    a time."""
    assert new().parse(text) == expected
    for cut in range(1, len(text)):
        assert parsed(stream(new(), [text[:cut], text[cut:]])) == expected, cut
    assert parsed(stream(new(), list(text))) == expected


def assert_calls_sent_as_they_end(
    new: Callable[[], ChoiceParser], text: str, call_ends: Sequence[int]
) -> None:
    """Fed ``text`` up to any position, a parser has sent exactly the calls that end there or
    before (call ``i`` ends at ``call_ends[i]``), each with its name, whatever follows."""
    names = [call.name for call in new().parse(text).tool_calls]
    assert len(names) == len(call_ends)
    for cut in range(len(text) + 1):
        sent = [d.tool_call for d in new().feed(text[:cut]) if d.tool_call is not None]
        ended = sum(end <= cut for end in call_ends)
        assert [piece.name for piece in sent] == names[:ended], cut
