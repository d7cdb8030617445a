"""Streaming checks shared by the per-format parser tests."""

from __future__ import annotations

from collections.abc import Callable

from app.protocol.output import ChoiceParser, ParsedOutput
from tests.protocol.output.helpers import parsed, stream


def assert_every_split(new: Callable[[], ChoiceParser], text: str, expected: ParsedOutput) -> None:
    """``text`` gives ``expected`` whole, cut in two at every position, and one character at
    a time."""
    assert new().parse(text) == expected
    for cut in range(1, len(text)):
        assert parsed(stream(new(), [text[:cut], text[cut:]])) == expected, cut
    assert parsed(stream(new(), list(text))) == expected
