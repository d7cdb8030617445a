"""Sections of ``invoke`` elements with ``parameter`` children (MiniMax M2, DeepSeek DSML).

    SECTION_OPEN
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    </invoke>
    <invoke name="...">...</invoke>
    SECTION_CLOSE

The formats differ in their tag names (DSML prefixes them with ``｜DSML｜``) and in how a value
is typed (``InvokeTags.value``). Whitespace between tags is layout; a value is verbatim up to
its closing tag. Each invoke goes out when its closing tag arrives (the section's scanner
finds it outside the values). Anything else in a section, a parameter named twice or an
invoke without a name is text, with the rest of its section.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from app.protocol.output.interface import Call, Schemas, TagCalls
from app.protocol.output.scanning import ValueSkippingEnd, skip_space
from app.protocol.output.schema import encode_call

_ATTRIBUTE = re.compile(r"""\s+([A-Za-z_][\w-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
_TAG_END = re.compile(r"\s*>")

ValueReader = Callable[[str, dict[str, str], Any], Any]
"""``(raw text, the parameter tag's attributes, its JSON schema or None) -> JSON value``."""


@dataclass(frozen=True, slots=True)
class InvokeTags:
    invoke: str
    """The start of an invoke's opening tag, up to its attributes (``<invoke``)."""
    invoke_close: str
    parameter: str
    parameter_close: str
    value: ValueReader

    def section_end(self, closes: Sequence[str]) -> ValueSkippingEnd:
        """The scanner of a section that any of ``closes`` ends (not inside a value)."""
        return ValueSkippingEnd(
            closes, (self.parameter,), (self.parameter_close,), (self.invoke_close,)
        )

    def tag_calls(self, sections: Sequence[tuple[str, str]]) -> TagCalls:
        """Calls in sections between any ``(open, close)`` pair of ``sections`` (the first
        close is the main spelling); a section that opens in the reasoning ends it."""
        closes = tuple(close for _, close in sections)
        return TagCalls(
            opens=tuple(opening for opening, _ in sections),
            close=closes[0],
            other_closes=closes[1:],
            block_end=partial(self.section_end, closes),
            decode=partial(decode_invokes, tags=self),
            end_reasoning=True,
        )


def _open_tag(text: str, pos: int, start: str) -> tuple[dict[str, str], int] | None:
    """The attributes of a ``start ... >`` tag at ``pos`` (after whitespace), and the end
    of the tag; None when no such tag is there."""
    pos = skip_space(text, pos)
    if not text.startswith(start, pos):
        return None
    pos += len(start)
    attributes: dict[str, str] = {}
    while match := _ATTRIBUTE.match(text, pos):
        name, *values = match.groups()
        attributes[name] = next(v for v in values if v is not None)
        pos = match.end()
    end = _TAG_END.match(text, pos)
    return None if end is None else (attributes, end.end())


def _at(text: str, pos: int, tag: str) -> int | None:
    """The end of ``tag`` when it follows ``pos`` after whitespace."""
    start = skip_space(text, pos)
    return start + len(tag) if text.startswith(tag, start) else None


def _invoke(text: str, pos: int, tags: InvokeTags, schemas: Schemas) -> tuple[Call, int] | None:
    """One invoke from ``pos``: the call and where the text after it starts."""
    head = _open_tag(text, pos, tags.invoke)
    name = None if head is None else head[0].get("name", "").strip()
    if head is None or not name:
        return None
    pos = head[1]
    properties = schemas.get(name, {})
    arguments: dict[str, Any] = {}
    while (end := _at(text, pos, tags.invoke_close)) is None:
        parameter = _open_tag(text, pos, tags.parameter)
        if parameter is None:
            return None
        attributes, value_start = parameter
        key = attributes.get("name", "")
        value_end = text.find(tags.parameter_close, value_start)
        if not key or key in arguments or value_end < 0:
            return None
        raw = text[value_start:value_end]
        arguments[key] = tags.value(raw, attributes, properties.get(key))
        pos = value_end + len(tags.parameter_close)
    call = encode_call(name, arguments)
    return None if call is None else (call, end)


def decode_invokes(block: str, schemas: Schemas, tags: InvokeTags) -> list[Call] | None:
    """Every call of a section, or ``None`` when the section is not well-formed."""
    calls: list[Call] = []
    pos = 0
    while skip_space(block, pos) < len(block):
        found = _invoke(block, pos, tags, schemas)
        if found is None:
            return None
        call, pos = found
        calls.append(call)
    return calls or None
