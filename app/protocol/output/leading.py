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

from app.protocol.output.deltas import ChatDelta
from app.protocol.output.interface import BlockEnd, ParserOptions, TagCalls
from app.protocol.output.parser import OutputParser
from app.protocol.output.schema import parameter_schemas
from app.protocol.output.stepping import SteppedParser


class _State(Enum):
    LEAD = auto()  # only whitespace so far
    BLOCK = auto()  # inside a call list that opened the answer
    REST = auto()  # everything else goes to the shared parser


class LeadingCallsParser(SteppedParser):
    """A ``ChoiceParser``: calls that open the answer bare (``leading``), then ``calls``'
    marked blocks anywhere, through the shared parser. Its own tool calls are the leading
    ones; the shared parser's are numbered after them."""

    def __init__(self, options: ParserOptions, *, leading: str, calls: TagCalls) -> None:
        super().__init__(options.id_factory)
        reading = options.tool_calls
        self._rest = OutputParser(options, calls=calls if reading else None, markers=None)
        self._state = _State.LEAD if reading else _State.REST
        self._leading = leading
        self._calls = calls
        self._tools = options.tools
        self._space = ""  # the whitespace before a leading block
        self._block_end: BlockEnd | None = None

    def finish(self) -> list[ChatDelta]:
        return super().finish() + self._shifted(self._rest.finish())

    def finish_reason(self, upstream_reason: str) -> str:
        return super().finish_reason(self._rest.finish_reason(upstream_reason))

    def _step(self, out: list[ChatDelta], final: bool) -> bool:
        if self._state is _State.LEAD:
            answer = self._buffer.lstrip()
            if not answer and not final:
                return False
            if answer.startswith(self._leading):
                self._state = _State.BLOCK
                self._block_end = self._calls.block_end()
                self._space, self._buffer = self._buffer[: -len(answer)], answer
            else:
                self._state = _State.REST
            return True
        if self._state is _State.BLOCK:
            assert self._block_end is not None
            end = self._block_end.find(self._buffer)
            if end is None and not final:
                return False
            self._state = _State.REST
            end = len(self._buffer) if end is None else end
            block, self._buffer = self._buffer[:end], self._buffer[end:]
            calls = self._calls.decode(block, parameter_schemas(self._tools))
            if calls:
                for name, arguments in calls:
                    self._emit_call(out, name, arguments)
            else:
                out.append(ChatDelta(content=self._space + block))
            return True
        rest, self._buffer = self._buffer, ""
        if rest:
            out.extend(self._shifted(self._rest.feed(rest)))
        return False

    def _shifted(self, deltas: list[ChatDelta]) -> list[ChatDelta]:
        """The shared parser's deltas, its tool calls numbered after the leading ones."""
        if not self._tool_calls:
            return deltas
        return [
            delta
            if delta.tool_call is None
            else ChatDelta(
                tool_call=dataclasses.replace(
                    delta.tool_call, index=delta.tool_call.index + self._tool_calls
                )
            )
            for delta in deltas
        ]
