"""JSON tool-call arguments: following them as they arrive, and taking them as written.

Formats that write a tool call's arguments as JSON either close the call with a marker (which
may also appear inside a string value, where it is text) or with nothing at all (the call ends
where its JSON value does). ``JsonCursor`` answers both, scanning each character once however
the text is split.
"""

from __future__ import annotations

import re

from app.protocol.output.schema import loads_strict

_IN_STRING = re.compile(r'["\\]')
_OPENERS = "{["
_CLOSERS = "}]"


class JsonCursor:
    """A position in JSON text with its string and bracket state.

    ``scan`` moves it forward over the text seen so far and stops at the first character of
    ``stops`` outside a string (returning its index, cursor left on it), or, with
    ``ends_with_value``, just after the bracket that closes the outermost value (returning
    that index), or at the end of the text (returning ``None``; call again with the text
    grown). Brackets are counted, not matched: a wrong closer is the decoder's business.
    """

    def __init__(self, *, stops: str = "", ends_with_value: bool = False) -> None:
        self.pos = 0
        self.depth = 0
        self.in_string = False
        brackets = _OPENERS + _CLOSERS if ends_with_value else ""
        self._outside = re.compile("[" + re.escape('"' + brackets + stops) + "]")
        self._stops = stops

    def scan(self, text: str) -> int | None:
        while True:
            pattern = _IN_STRING if self.in_string else self._outside
            match = pattern.search(text, self.pos)
            if match is None:
                self.pos = len(text)
                return None
            at = match.start()
            char = text[at]
            if char == "\\":
                if at + 1 >= len(text):  # the escaped character has not arrived yet
                    self.pos = at
                    return None
                self.pos = at + 2
            elif char == '"':
                self.in_string = not self.in_string
                self.pos = at + 1
            elif char in self._stops:
                self.pos = at
                return at
            else:
                self.pos = at + 1
                self.depth += 1 if char in _OPENERS else -1
                if self.depth <= 0:
                    return self.pos

    def skip(self, count: int) -> None:
        """Step over ``count`` characters the caller has read itself (a stop, a marker)."""
        self.pos += count


def json_object_text(raw: str) -> str | None:
    """The arguments as the model wrote them (outer whitespace stripped; nothing written is
    ``{}``) when they are one JSON object, else ``None``.

    The text is kept, not re-serialised: vLLM returns these formats' arguments so, and their
    chat templates write the string back verbatim when the call comes round again.
    """
    text = raw.strip()
    if not text:
        return "{}"
    try:
        value = loads_strict(text)
        text.encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        return None
    return text if isinstance(value, dict) else None
