"""What a tool-call format declares, and what every choice parser offers.

A format is one ``Format`` value in its own module, registered in ``formats.FORMATS``. Most
formats are tag-delimited and only describe their markup (``TagCalls``): the shared state
machine (``parser.OutputParser``) does the streaming. A format that does not fit it brings
its own parser class instead (``Format.parser``), which implements ``ChoiceParser``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.generation import ToolFormat
from app.protocol.output.deltas import ChatDelta, ParsedOutput

Call = tuple[str, str]
"""One decoded tool call: its function name and its arguments as a JSON object string."""

Schemas = dict[str, dict[str, Any]]
"""``{function name: {parameter name: JSON schema}}``, from ``schema.parameter_schemas``."""


class BlockEnd(Protocol):
    """Finds where a tool-call block closes, in a body that grows between calls.

    One instance per block; ``find`` gets the whole body after the opening marker every time
    (the same text plus whatever arrived since) and may remember how far it has scanned.

    The scanner of a section of several calls may also keep ``call_ends``, a list of where
    each call found so far ends in the body (just after its end marker), in order: each call
    then goes out at its own end instead of waiting for the section's.
    """

    def find(self, body: str) -> int | None:
        """Where the closing marker starts in ``body``, or None while it has not arrived."""
        ...


class ChoiceParser(Protocol):
    """One generated choice's text in, OpenAI chat deltas out (``OutputParser``'s protocol).

    ``feed`` each decoded piece as it arrives, then ``finish`` once; or ``parse`` a whole
    text on a fresh parser. Every split of the same text must fold to the same fields.
    """

    def feed(self, text: str) -> list[ChatDelta]: ...

    def finish(self) -> list[ChatDelta]: ...

    def parse(self, text: str) -> ParsedOutput: ...

    def finish_reason(self, upstream_reason: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Reasoning:
    """The markers around a family's reasoning (``<think>`` and ``</think>``)."""

    open: str
    close: str

    def opened_by(self, prompt_tail: str) -> bool:
        """The rendered prompt ends inside an opened reasoning block (the template wrote
        ``open`` after the generation prompt), so the output starts as reasoning."""
        return prompt_tail.rstrip().endswith(self.open)


THINK = Reasoning("<think>", "</think>")


@dataclass(frozen=True, slots=True)
class TagCalls:
    """Tool calls written as blocks between markers, for the shared state machine.

    ``opens``: the markers that start a block (the earliest in the text wins). ``close``:
    the marker ``BlockEnd.find`` reports; ``None`` when the format has none, and the block
    ends where ``find`` says (after a JSON value, say) or, when it never says (``NeverEnds``),
    at the end of the output. ``block_end``: a fresh scanner per block.
    ``decode``: the calls in a block's text (between the markers, markers excluded): a
    section may hold several; ``None`` when the block is not well-formed, and the block then
    becomes content, markers and all. Where the scanner keeps ``call_ends``, ``decode``
    gets each call's text as the call ends, then what is left of the block when it closes.
    """

    opens: tuple[str, ...]
    close: str | None
    block_end: Callable[[], BlockEnd]
    decode: Callable[[str, Schemas], list[Call] | None]
    end_reasoning: bool = False
    """An opening marker inside reasoning ends the reasoning: the model went on to a call
    without writing the closing marker (vLLM reads GLM, MiniMax, DSML, Gemma 4 and Seed-OSS
    so). Otherwise a call written inside reasoning is reasoning text."""
    other_closes: tuple[str, ...] = ()
    """Variant spellings of ``close`` the scanner may also report (DeepSeek V3.2 and V4 wrap
    their calls differently); the marker found at the reported position is the one consumed."""

    @property
    def closes(self) -> tuple[str, ...]:
        """Every closing marker, ``close`` first."""
        return self.other_closes if self.close is None else (self.close, *self.other_closes)


class NeverEnds:
    """The ``BlockEnd`` of a block that runs to the end of the output."""

    def find(self, body: str) -> int | None:
        return None


@dataclass(frozen=True, slots=True)
class ParserOptions:
    """What a parser is built with, for one generated choice."""

    reasoning: bool
    """Split the format's reasoning out into ``reasoning_content``."""
    tools: list[dict[str, Any]] | None
    """The request's OpenAI tools (their schemas type raw-text values)."""
    tool_calls: bool
    """Read tool calls (False: the format's markup is content)."""
    starts_in_reasoning: bool
    """The prompt opened the reasoning block (``Reasoning.opened_by``)."""
    id_factory: Callable[[], str]
    """A fresh tool-call id per call."""


@dataclass(frozen=True, slots=True)
class Format:
    """Everything the proxy knows about one way of writing tool calls.

    Exactly one of ``calls`` (tag-delimited: the shared parser) and ``parser`` (its own
    ``ChoiceParser`` class) is set.
    """

    name: ToolFormat
    template_markers: tuple[str, ...]
    """Strings that all appear in a chat template that teaches this format (``auto``); the
    detector prefers the format with the most markers matched, so a format that extends
    another (``qwen3_coder`` over ``hermes``) lists the other's markers too."""
    reasoning: Reasoning | None = THINK
    """The family's reasoning markers; None: the model writes no reasoning text."""
    calls: TagCalls | None = None
    parser: Callable[[ParserOptions], ChoiceParser] | None = None
    special_tokens: tuple[str, ...] = ()
    """Its markers (reasoning markers included) where the model's vocabulary may make them
    special tokens, which servers leave out of the text they return: the upstream is asked to
    keep special tokens, and llama.cpp is told these one by one (it ignores a string that is
    not one special token). Empty: all its markers are plain text."""
    stop: tuple[str, ...] = ()
    """Special tokens the answer ends at, each asked for as a stop token (harmony's
    ``<|call|>``): the servers stop at a model's end-of-turn token, not at these."""
    call_id: Callable[[], str] | None = None
    """A fresh id per tool call where the family's chat templates insist on a shape (Mistral:
    nine letters and digits); None: ``call_`` and hex digits."""

    def __post_init__(self) -> None:
        if (self.calls is None) == (self.parser is None):
            raise ValueError(f"{self.name}: set exactly one of calls and parser")
