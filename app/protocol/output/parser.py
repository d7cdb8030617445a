"""The incremental parser of tag-delimited formats: one choice's text in, OpenAI deltas out.

States, in the order output can walk them (markers from the format: ``Reasoning`` and
``TagCalls``)::

    START ──open──▶ REASONING ──close──▶ CONTENT ⇄ TOOL  (an opening marker … its close)
      └──────── anything else ────────▶ CONTENT

Text is emitted as soon as it cannot be part of a marker; a tail that could still grow into
one is held until the next piece (or ``finish``) decides, and so is whitespace opening a
content segment while a tool call may follow (it is then layout). A tool-call block is held
whole and emitted at its closing marker (or, for formats without one, at the end of the
output), one delta per call with id, name and complete arguments: only then is it known to
be a tool call at all, and a delta once sent cannot be taken back. A section of several calls
whose scanner finds each call's end (``BlockEnd``'s ``call_ends``) sends each call at its own
end; the first call that does not decode, and the rest of its section, are text.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from enum import Enum, auto

from app.protocol.output.deltas import ChatDelta
from app.protocol.output.interface import (
    THINK,
    BlockEnd,
    Call,
    NeverEnds,
    ParserOptions,
    Reasoning,
    Schemas,
    TagCalls,
)
from app.protocol.output.scanning import find_tag, partial_tag_start
from app.protocol.output.schema import parameter_schemas
from app.protocol.output.stepping import SteppedParser


def new_tool_call_id() -> str:
    """``call_`` and 24 random hex digits."""
    return "call_" + secrets.token_hex(12)


class _State(Enum):
    START = auto()
    REASONING = auto()
    CONTENT = auto()
    TOOL = auto()


class OutputParser(SteppedParser):
    """Splits one choice's generated text into reasoning, content and tool calls.

    ``feed`` each decoded text piece as it arrives, then ``finish`` once; or ``parse`` a whole
    text on a fresh parser. Every split of the same text yields the same fields.

    Whitespace-only text between markup blocks that touches a tool call (``</think>\\n\\n``
    before one, the ``\\n`` between two, the tail after the last) is layout and dropped, and
    so are the newlines that open the answer after ``</think>`` (the chat templates drop them
    too, ``.lstrip("\\n")``, when they render the turn back); all other text outside tags is
    kept verbatim, and a block that is not a well-formed tool call (bad JSON, unclosed at the
    end of output) becomes content, tags included.
    """

    def __init__(
        self,
        options: ParserOptions,
        *,
        calls: TagCalls | None,
        markers: Reasoning | None = THINK,
    ) -> None:
        """``calls``: the format's tool-call markup, None to parse no tool calls; ``markers``:
        its reasoning markers, None when it writes none."""
        super().__init__(options.id_factory)
        reasoning = markers if options.reasoning else None
        if options.starts_in_reasoning and reasoning is None:
            raise ValueError("starts_in_reasoning needs reasoning")
        self._state = _State.CONTENT
        if reasoning is not None:
            self._state = _State.REASONING if options.starts_in_reasoning else _State.START
        self._think = reasoning or THINK
        ends: tuple[str, ...] = (self._think.close,)
        if calls is not None and calls.end_reasoning:
            ends += calls.opens
        self._reasoning_ends = ends  # what a reasoning tail may be growing into
        self._calls = calls
        self._tools = options.tools
        self._schemas: Schemas | None = None  # built at the first block
        # in TOOL, _buffer holds the block after its opener
        self._opener = ""  # the marker that opened the current block
        self._block_end: BlockEnd = NeverEnds()
        self._call_ends: list[int] | None = None  # None: the block's calls go out at its end
        self._sent = 0  # where the block's calls already sent end in the block
        self._ends_read = 0  # how many of _call_ends were read
        self._held_space = ""  # whitespace opening a content segment, dropped if layout
        self._segment_has_text = calls is None
        self._after_tool_call = False
        self._after_think = False  # newlines opening the answer are still to be dropped

    def finish(self) -> list[ChatDelta]:
        """Deltas for everything still held, resolving open tags as text; whitespace still
        held is text unless it trails a tool call (layout)."""
        out = super().finish()
        if self._held_space and not self._after_tool_call:
            self._emit(out, content=self._held_space)
        self._held_space = ""
        return out

    # --- the state machine -------------------------------------------------------------

    def _step(self, out: list[ChatDelta], final: bool) -> bool:
        return _STEPS[self._state](self, out, final)

    def _start(self, out: list[ChatDelta], final: bool) -> bool:
        """Output opens with the reasoning marker (after optional whitespace) or is content."""
        rest = self._buffer.lstrip()
        opening = self._think.open
        if rest.startswith(opening):
            self._buffer = rest[len(opening) :]
            self._state = _State.REASONING
            return True
        if not final and opening.startswith(rest):
            return False
        self._state = _State.CONTENT
        return True

    def _reasoning(self, out: list[ChatDelta], final: bool) -> bool:
        closing = self._think.close
        end = self._buffer.find(closing)
        call = self._call_in_reasoning(end)
        if call >= 0:  # the model went on to a call without closing its reasoning
            self._emit(out, reasoning=self._buffer[:call])
            self._buffer = self._buffer[call:]
            self._state = _State.CONTENT
            self._begin_segment(after_tool_call=False)
            return True
        if end >= 0:
            self._emit(out, reasoning=self._buffer[:end])
            self._buffer = self._buffer[end + len(closing) :]
            self._state = _State.CONTENT
            self._after_think = True
            self._begin_segment(after_tool_call=False)
            return True
        cut = len(self._buffer) if final else partial_tag_start(self._buffer, self._reasoning_ends)
        self._emit(out, reasoning=self._buffer[:cut])
        self._buffer = self._buffer[cut:]
        return False

    def _call_in_reasoning(self, end: int) -> int:
        """Where a call opens before ``end`` (the closing marker, -1: none yet) for a format
        whose calls end its reasoning (``TagCalls.end_reasoning``); -1 when none does."""
        calls = self._calls
        if calls is None or not calls.end_reasoning:
            return -1
        hit = find_tag(self._buffer[: end if end >= 0 else len(self._buffer)], calls.opens)
        return -1 if hit is None else hit[0]

    def _content(self, out: list[ChatDelta], final: bool) -> bool:
        if self._after_think:
            self._buffer = self._buffer.lstrip("\n")
            if not self._buffer and not final:
                return False  # only newlines so far: the answer has not begun
            self._after_think = False
        calls = self._calls
        if calls is None:
            self._emit_content(out, self._buffer)
            self._buffer = ""
            return False
        hit = find_tag(self._buffer, calls.opens)
        if hit is not None:
            start, self._opener = hit
            self._emit_content(out, self._buffer[:start])
            self._buffer = self._buffer[start + len(self._opener) :]
            self._block_end = calls.block_end()
            ends = getattr(self._block_end, "call_ends", None)
            self._call_ends = ends if isinstance(ends, list) else None
            self._sent = self._ends_read = 0
            self._state = _State.TOOL
            return True
        cut = len(self._buffer) if final else partial_tag_start(self._buffer, calls.opens)
        self._emit_content(out, self._buffer[:cut])
        self._buffer = self._buffer[cut:]
        return False

    def _tool(self, out: list[ChatDelta], final: bool) -> bool:
        assert self._calls is not None
        closes = self._calls.closes
        end = self._block_end.find(self._buffer)
        self._send_ended_calls(out)
        if end is None and final:
            # Unclosed by the scanner's reading (say, an unbalanced quote): fall back to the
            # first literal closing marker after the calls sent, so later blocks still parse;
            # a format without one ends its block here.
            literal = (
                find_tag(self._buffer, closes, self._sent) if closes else (len(self._buffer), "")
            )
            if literal is None:
                self._emit_content(out, self._unsent(self._buffer))
                self._buffer = ""
                self._state = _State.CONTENT
                return True
            end = literal[0]
        if end is None:
            return False
        closing = next((c for c in closes if self._buffer.startswith(c, end)), "")
        block = self._buffer[:end]
        self._buffer = self._buffer[end + len(closing) :]
        self._state = _State.CONTENT
        rest = block[self._sent :]
        decoded = [] if self._sent and not rest.strip() else self._decode(rest)
        if decoded is None:
            self._emit_content(out, self._unsent(block) + closing)
            return True
        self._send(out, decoded)
        return True

    def _send_ended_calls(self, out: list[ChatDelta]) -> None:
        """Send each call the section's scanner has seen end since the last one sent; at the
        first that does not decode, stop: it and the rest of the section go out as text."""
        while self._call_ends is not None and self._ends_read < len(self._call_ends):
            end = self._call_ends[self._ends_read]
            self._ends_read += 1
            decoded = self._decode(self._buffer[self._sent : end])
            if decoded is None:
                self._call_ends = None
                return
            self._sent = end
            self._send(out, decoded)

    def _decode(self, block: str) -> list[Call] | None:
        """The calls in ``block``, None when it is not well formed (or holds none)."""
        assert self._calls is not None
        if self._schemas is None:
            self._schemas = parameter_schemas(self._tools)
        return self._calls.decode(block, self._schemas) or None

    def _send(self, out: list[ChatDelta], calls: list[Call]) -> None:
        """Emit ``calls``; whitespace on either side of them is layout."""
        self._held_space = ""
        for name, arguments in calls:
            self._emit_call(out, name, arguments)
        self._begin_segment(after_tool_call=True)

    def _unsent(self, block: str) -> str:
        """The text of ``block`` no call sent holds: all of it, with its opening marker,
        when none was sent."""
        return block[self._sent :] if self._sent else self._opener + block

    # --- emission ----------------------------------------------------------------------

    def _begin_segment(self, *, after_tool_call: bool) -> None:
        self._segment_has_text = self._calls is None
        self._after_tool_call = after_tool_call

    def _emit_content(self, out: list[ChatDelta], text: str) -> None:
        """Content text, except whitespace opening a segment: held until text follows."""
        if self._segment_has_text:
            self._emit(out, content=text)
            return
        text = self._held_space + text
        if text.isspace() or not text:
            self._held_space = text
            return
        self._held_space = ""
        self._segment_has_text = True
        self._emit(out, content=text)


_STEPS: dict[_State, Callable[[OutputParser, list[ChatDelta], bool], bool]] = {
    _State.START: OutputParser._start,
    _State.REASONING: OutputParser._reasoning,
    _State.CONTENT: OutputParser._content,
    _State.TOOL: OutputParser._tool,
}
"""Each state's step: True when it changed state and the next step should run."""
