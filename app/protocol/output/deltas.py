"""What a parsed generation yields: streaming deltas and the one-shot result.

A ``ChatDelta`` maps one-to-one onto the ``delta`` object of an OpenAI
``chat.completion.chunk``; a ``ParsedOutput`` onto the ``message`` of a ``chat.completion``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """One streamed piece of tool call ``index``; ``id`` and ``name`` only on its first piece."""

    index: int
    arguments: str
    id: str | None = None
    name: str | None = None

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index}
        if self.id is not None:
            out |= {"id": self.id, "type": "function"}
        if self.name is not None:
            out["function"] = {"name": self.name, "arguments": self.arguments}
        else:
            out["function"] = {"arguments": self.arguments}
        return out


@dataclass(frozen=True, slots=True)
class ChatDelta:
    """Exactly one of content text, reasoning text or a tool-call piece (never empty text)."""

    content: str | None = None
    reasoning_content: str | None = None
    tool_call: ToolCallDelta | None = None

    def __post_init__(self) -> None:
        present = [x for x in (self.content, self.reasoning_content, self.tool_call) if x]
        if len(present) != 1:
            raise ValueError("a ChatDelta carries exactly one non-empty field")

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``choices[].delta`` object for this piece."""
        if self.content is not None:
            return {"content": self.content}
        if self.reasoning_content is not None:
            return {"reasoning_content": self.reasoning_content}
        assert self.tool_call is not None
        return {"tool_calls": [self.tool_call.to_openai()]}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call; ``arguments`` is a JSON object serialised as a string."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    """A whole generation split into OpenAI message fields (``None`` where nothing came)."""

    content: str | None
    reasoning_content: str | None
    tool_calls: list[ToolCall]

    def finish_reason(self, upstream_reason: str) -> str:
        """``"tool_calls"`` when any tool call was parsed, else the upstream's own reason."""
        return "tool_calls" if self.tool_calls else upstream_reason

    @classmethod
    def from_deltas(cls, deltas: Iterable[ChatDelta]) -> ParsedOutput:
        """Fold a delta stream the way an OpenAI client accumulates chunks."""
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, list[str]] = {}
        heads: dict[int, tuple[str, str]] = {}
        for delta in deltas:
            if delta.content is not None:
                content.append(delta.content)
            elif delta.reasoning_content is not None:
                reasoning.append(delta.reasoning_content)
            elif delta.tool_call is not None:
                piece = delta.tool_call
                if piece.id is not None and piece.name is not None:
                    heads[piece.index] = (piece.id, piece.name)
                calls.setdefault(piece.index, []).append(piece.arguments)
        return cls(
            content="".join(content) or None,
            reasoning_content="".join(reasoning) or None,
            tool_calls=[
                ToolCall(id=heads[i][0], name=heads[i][1], arguments="".join(calls[i]))
                for i in sorted(calls)
            ],
        )
