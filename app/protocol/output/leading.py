"""The parser of formats whose tool calls may open the answer with no marker at all.

Llama 3 writes ``{"name": ...}`` and Llama 4 / Gemma 3 write ``[f(x=1)]`` as the whole
answer, or after a special token (``<|python_tag|>``, ``<|python_start|>``) when the
upstream keeps those. A bare ``{`` or ``[`` only means a call where the answer begins (as in
vLLM): prose or code further on that happens to hold one is content. So this parser looks
at the first text that is not whitespace: a call list there is read with the format's
``BlockEnd`` and ``decode``; the rest of the output, or all of it when the answer opens with
anything else, goes to the shared ``OutputParser``, which finds the marked calls.

The models of these formats write no reasoning text, so there is none to split off first.
"""

from __future__ import annotations

import dataclasses
from enum import Enum, auto

from app.protocol.output.deltas import ChatDelta, ParsedOutput, ToolCallDelta
from app.protocol.output.interface import BlockEnd, ParserOptions, TagCalls
from app.protocol.output.parser import OutputParser
from app.protocol.output.schema import parameter_schemas


class _State(Enum):
    LEAD = auto()  # only whitespace so far
    BLOCK = auto()  # inside a call list that opened the answer
    REST = auto()  # everything else goes to the shared parser


class LeadingCallsParser:
    """A ``ChoiceParser``: calls that open the answer bare (``leading``), then ``calls``'
    marked blocks anywhere, through the shared parser."""

    def __init__(self, options: ParserOptions, *, leading: str, calls: TagCalls) -> None:
        reading = options.tool_calls
        self._rest = OutputParser(options, calls=calls if reading else None, markers=None)
        self._state = _State.LEAD if reading else _State.REST
        self._leading = leading
        self._calls = calls
        self._options = options
        self._buffer = ""  # in LEAD and BLOCK, the text not yet resolved
        self._space = ""  # the whitespace before a leading block
        self._block_end: BlockEnd | None = None
        self._leading_calls = 0
        self._finished = False

    def feed(self, text: str) -> list[ChatDelta]:
        if self._finished:
            raise RuntimeError("feed() after finish()")
        return self._advance(text, final=False)

    def finish(self) -> list[ChatDelta]:
        if self._finished:
            raise RuntimeError("finish() called twice")
        out = self._advance("", final=True)
        self._finished = True
        return out + self._shifted(self._rest.finish())

    def parse(self, text: str) -> ParsedOutput:
        return ParsedOutput.from_deltas([*self.feed(text), *self.finish()])

    def finish_reason(self, upstream_reason: str) -> str:
        return "tool_calls" if self._leading_calls else self._rest.finish_reason(upstream_reason)

    def _advance(self, text: str, *, final: bool) -> list[ChatDelta]:
        self._buffer += text
        out: list[ChatDelta] = []
        if self._state is _State.LEAD:
            answer = self._buffer.lstrip()
            if not answer and not final:
                return out
            if answer.startswith(self._leading):
                self._state = _State.BLOCK
                self._block_end = self._calls.block_end()
                self._space, self._buffer = self._buffer[: -len(answer)], answer
            else:
                self._state = _State.REST
        if self._state is _State.BLOCK:
            assert self._block_end is not None
            end = self._block_end.find(self._buffer)
            if end is None and not final:
                return out
            self._state = _State.REST
            end = len(self._buffer) if end is None else end
            block, self._buffer = self._buffer[:end], self._buffer[end:]
            calls = self._calls.decode(block, parameter_schemas(self._options.tools))
            if calls:
                out.extend(self._call_delta(name, arguments) for name, arguments in calls)
            else:
                out.append(ChatDelta(content=self._space + block))
        rest, self._buffer = self._buffer, ""
        return out + self._shifted(self._rest.feed(rest)) if rest else out

    def _call_delta(self, name: str, arguments: str) -> ChatDelta:
        piece = ToolCallDelta(
            index=self._leading_calls, id=self._options.id_factory(), name=name, arguments=arguments
        )
        self._leading_calls += 1
        return ChatDelta(tool_call=piece)

    def _shifted(self, deltas: list[ChatDelta]) -> list[ChatDelta]:
        """The shared parser's deltas, its tool calls numbered after the leading ones."""
        if not self._leading_calls:
            return deltas
        return [
            delta
            if delta.tool_call is None
            else ChatDelta(
                tool_call=dataclasses.replace(
                    delta.tool_call, index=delta.tool_call.index + self._leading_calls
                )
            )
            for delta in deltas
        ]
