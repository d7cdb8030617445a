"""Tool calls in a section of marker tokens around JSON arguments (Kimi K2, DeepSeek V3.1).

    SECTION_BEGIN
      CALL_BEGIN header ARGS_BEGIN {json} CALL_END
      CALL_BEGIN header ARGS_BEGIN {json} CALL_END
    SECTION_END

The formats differ only in their markers, in how the header names the function and in
whether a section ends the reasoning (``section_format`` builds each). A
marker inside a JSON string of the arguments is text (code that mentions it), so the
arguments are followed with a ``JsonCursor``. Each call goes out at its own ``CALL_END``
(``SectionEnd.call_ends``); a call whose ``CALL_END`` is missing ends at the section's end,
as in vLLM. The first call that is not well formed is text, and so is the rest of its
section.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from app.generation import ToolFormat
from app.protocol.output.interface import THINK, Call, Format, Schemas, TagCalls
from app.protocol.output.json_args import JsonCursor, json_object_text
from app.protocol.output.scanning import find_tag, partial_tag_start


@dataclass(frozen=True, slots=True)
class SectionMarkers:
    begin: str
    end: str
    call_begin: str
    args_begin: str
    call_end: str

    @property
    def all(self) -> tuple[str, ...]:
        return (self.begin, self.end, self.call_begin, self.args_begin, self.call_end)

    @property
    def first_chars(self) -> str:
        """The characters the closing markers start with (where a JSON scan must look)."""
        return "".join(sorted({self.end[0], self.call_end[0]}))


class SectionEnd:
    """Finds the ``end`` marker that closes a section, and where each of its calls ends,
    scanning only text not seen before (``call_ends``)."""

    def __init__(self, markers: SectionMarkers) -> None:
        self._markers = markers
        self._header_tags = (markers.args_begin, markers.end)
        self._closers = (markers.call_end, markers.end)
        self._pos = 0
        self._arguments: JsonCursor | None = None  # inside a call's arguments
        self.call_ends: list[int] = []

    def find(self, body: str) -> int | None:
        """Where the closing marker starts in ``body`` (the text after ``begin``), if yet."""
        while True:
            if self._arguments is None:
                hit = find_tag(body, self._header_tags, self._pos)
                if hit is None:
                    self._pos = partial_tag_start(body, self._header_tags, self._pos)
                    return None
                at, tag = hit
                if tag == self._markers.end:
                    return at
                self._arguments = JsonCursor(stops=self._markers.first_chars)
                self._arguments.pos = at + len(tag)
                continue
            at_stop = self._arguments.scan(body)
            if at_stop is None:
                return None
            closer = next((tag for tag in self._closers if body.startswith(tag, at_stop)), None)
            if closer == self._markers.end:
                return at_stop
            if closer is not None:
                self._pos = at_stop + len(closer)
                self._arguments = None
                self.call_ends.append(self._pos)
            elif any(tag.startswith(body[at_stop:]) for tag in self._closers):
                return None  # a marker still arriving
            else:
                self._arguments.skip(1)


def _call_end(body: str, args_start: int, markers: SectionMarkers) -> tuple[int, int]:
    """``(end of the arguments, start of what follows the call)`` for a call whose arguments
    start at ``args_start`` in a section's body."""
    cursor = JsonCursor(stops=markers.first_chars)
    cursor.pos = args_start
    while (at := cursor.scan(body)) is not None:
        if body.startswith(markers.call_end, at):
            return at, at + len(markers.call_end)
        cursor.skip(1)
    # An unbalanced quote hid every marker: the first literal one ends the call.
    literal = body.find(markers.call_end, args_start)
    if literal >= 0:
        return literal, literal + len(markers.call_end)
    return len(body), len(body)


def decode_section(
    body: str, markers: SectionMarkers, name_of: Callable[[str], str | None]
) -> list[Call] | None:
    """``(name, arguments JSON)`` of each call in a section's body (the text between ``begin``
    and ``end``); ``None`` unless there is at least one and every call is well formed (a name
    ``name_of`` accepts, arguments that are one JSON object) with only whitespace around."""
    calls: list[Call] = []
    pos = 0
    while body[pos:].strip():
        start = body.find(markers.call_begin, pos)
        if start < 0 or body[pos:start].strip():
            return None
        header_start = start + len(markers.call_begin)
        args_at = body.find(markers.args_begin, header_start)
        if args_at < 0:
            return None
        args_end, pos = _call_end(body, args_at + len(markers.args_begin), markers)
        name = name_of(body[header_start:args_at])
        arguments = json_object_text(body[args_at + len(markers.args_begin) : args_end])
        if name is None or arguments is None:
            return None
        calls.append((name, arguments))
    return calls or None


def section_format(
    name: ToolFormat,
    markers: SectionMarkers,
    name_of: Callable[[str], str | None],
    *,
    end_reasoning: bool = False,
) -> Format:
    """The format whose calls are sections of ``markers``, each call's header read by
    ``name_of``; every marker and ``<think>``/``</think>`` are special tokens."""

    def decode(body: str, schemas: Schemas) -> list[Call] | None:
        return decode_section(body, markers, name_of)  # the JSON carries its own types

    return Format(
        name=name,
        template_markers=(markers.begin, markers.args_begin),
        calls=TagCalls(
            opens=(markers.begin,),
            close=markers.end,
            block_end=partial(SectionEnd, markers),
            decode=decode,
            end_reasoning=end_reasoning,
        ),
        special_tokens=(*markers.all, THINK.open, THINK.close),
    )
