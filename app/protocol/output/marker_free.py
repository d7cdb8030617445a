"""No special-token marker reaches a client as text.

A format's parser returns what is not a well-formed tool call as content, markers and all, so
that no output is lost. Where those markers are special tokens (the server wrote them only
because it was asked to keep special tokens: ``Format.special_tokens``), they are control
tokens, not text: ``MarkerFree`` takes those that are special tokens of the model's vocabulary
out of the content and reasoning a parser emits on their way to the client (``marker_free``),
and the text around them stays. The tool calls' arguments pass as the model wrote them.

Text is held while its end could still grow into a marker (``"<|tool_ca"``), so a marker split
across two pieces is taken out whole; every split of an output yields the same fields.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.protocol.output.deltas import ChatDelta, ParsedOutput
from app.protocol.output.interface import ChoiceParser
from app.protocol.output.scanning import partial_tag_start


def marker_free(parser: ChoiceParser, markers: Sequence[str]) -> ChoiceParser:
    """``parser`` with ``markers`` (control tokens of the model's vocabulary) taken out."""
    return MarkerFree(parser, markers) if markers else parser


class MarkerFree:
    """``parser`` (a ``ChoiceParser``) with ``markers`` taken out of its content and
    reasoning."""

    def __init__(self, parser: ChoiceParser, markers: Sequence[str]) -> None:
        self._parser = parser
        self._markers = tuple(markers)
        self._pattern = re.compile("|".join(map(re.escape, self._markers)))
        self._firsts = frozenset(marker[0] for marker in self._markers)
        self._reach = max(map(len, self._markers)) - 1  # the longest tail a marker could start
        self._tail = ""  # text that could still grow into a marker
        self._tail_is_reasoning = False

    def finish_reason(self, upstream_reason: str) -> str:
        return self._parser.finish_reason(upstream_reason)

    def feed(self, text: str) -> list[ChatDelta]:
        return self._cleaned(self._parser.feed(text), final=False)

    def finish(self) -> list[ChatDelta]:
        return self._cleaned(self._parser.finish(), final=True)

    def parse(self, text: str) -> ParsedOutput:
        return ParsedOutput.from_deltas([*self.feed(text), *self.finish()])

    def _cleaned(self, deltas: list[ChatDelta], *, final: bool) -> list[ChatDelta]:
        out: list[ChatDelta] = []
        for delta in deltas:
            if delta.tool_call is not None:
                self._release(out)
                out.append(delta)
                continue
            reasoning = delta.reasoning_content is not None
            if reasoning != self._tail_is_reasoning:
                self._release(out)  # the other kind of text: what was held is not a marker
                self._tail_is_reasoning = reasoning
            text = self._strip(self._tail + (delta.reasoning_content or delta.content or ""))
            cut = self._held_from(text)
            self._tail = text[cut:]
            self._append(out, text[:cut])
        if final:
            self._release(out)
        return out

    def _held_from(self, text: str) -> int:
        """Where the text that must wait begins: a tail that could still grow into a marker,
        and before it any text that could join what follows into one, should that tail
        become a marker and be taken out."""
        cut = len(text)
        while not self._firsts.isdisjoint(text[max(0, cut - self._reach) : cut]) and (
            (start := partial_tag_start(text[:cut], self._markers)) < cut
        ):
            cut = start
        return cut

    def _release(self, out: list[ChatDelta]) -> None:
        tail, self._tail = self._tail, ""
        self._append(out, tail)

    def _append(self, out: list[ChatDelta], text: str) -> None:
        if not text:
            return
        if self._tail_is_reasoning:
            out.append(ChatDelta(reasoning_content=text))
        else:
            out.append(ChatDelta(content=text))

    def _strip(self, text: str) -> str:
        """``text`` without markers, and without any that taking one out joined up."""
        if self._firsts.isdisjoint(text):
            return text
        stripped = self._pattern.sub("", text)
        while stripped != text:
            text, stripped = stripped, self._pattern.sub("", stripped)
        return stripped
