"""What the choice parsers that step a state machine over buffered text share.

A parser keeps the text it has not resolved in ``_buffer``; ``feed`` adds a piece and runs
``_step`` until it waits for more, ``finish`` runs it once more with ``final`` set (nothing
more will come). Text goes out through ``_emit`` and tool calls through
``_emit_call``, which numbers them and gives each a fresh id.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from app.protocol.output.deltas import ChatDelta, ParsedOutput, ToolCallDelta


class SteppedParser(ABC):
    """A ``ChoiceParser`` whose subclass supplies the steps over its buffered text."""

    def __init__(self, id_factory: Callable[[], str]) -> None:
        self._buffer = ""  # text not yet resolved
        self._id_factory = id_factory
        self._tool_calls = 0
        self._finished = False

    def finish_reason(self, upstream_reason: str) -> str:
        """``"tool_calls"`` once a tool call was emitted, else the upstream's own reason."""
        return "tool_calls" if self._tool_calls else upstream_reason

    def feed(self, text: str) -> list[ChatDelta]:
        """Deltas for one more piece of generated text (possibly none while a tag is open)."""
        if self._finished:
            raise RuntimeError("feed() after finish()")
        out: list[ChatDelta] = []
        self._buffer += text
        self._advance(out, final=False)
        return out

    def finish(self) -> list[ChatDelta]:
        """Deltas for everything still held, resolving open tags as text."""
        if self._finished:
            raise RuntimeError("finish() called twice")
        out: list[ChatDelta] = []
        self._advance(out, final=True)
        self._finished = True
        return out

    def parse(self, text: str) -> ParsedOutput:
        """The whole generation at once (this parser must be fresh)."""
        return ParsedOutput.from_deltas([*self.feed(text), *self.finish()])

    def _advance(self, out: list[ChatDelta], *, final: bool) -> None:
        while self._step(out, final):
            pass

    @abstractmethod
    def _step(self, out: list[ChatDelta], final: bool) -> bool:
        """One step over ``_buffer``: True when it changed state and the next should run."""

    def _emit_call(self, out: list[ChatDelta], name: str, arguments: str) -> None:
        """Append the next tool call, whole, with a fresh id."""
        piece = ToolCallDelta(
            index=self._tool_calls, id=self._id_factory(), name=name, arguments=arguments
        )
        out.append(ChatDelta(tool_call=piece))
        self._tool_calls += 1

    @staticmethod
    def _emit(out: list[ChatDelta], *, content: str = "", reasoning: str = "") -> None:
        """Append text, merged into the previous delta when that is of the same kind."""
        last = out[-1] if out else None
        if content:
            if last is not None and last.content is not None:
                out[-1] = ChatDelta(content=last.content + content)
            else:
                out.append(ChatDelta(content=content))
        elif reasoning:
            if last is not None and last.reasoning_content is not None:
                out[-1] = ChatDelta(reasoning_content=last.reasoning_content + reasoning)
            else:
                out.append(ChatDelta(reasoning_content=reasoning))
