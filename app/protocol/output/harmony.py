"""gpt-oss's harmony format: messages on channels, not tags in the text.

    <|channel|>analysis<|message|>The user wants the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
    <|message|>{"city": "Paris"}<|call|>

(one line in the model's output; broken here to fit).

An answer is a run of messages. Each has a header (``<|start|>`` and the role, ``<|channel|>``
and its name, a ``to=`` recipient before or after the channel, a content type) and a body after
``<|message|>`` that ``<|end|>``, ``<|call|>`` or ``<|return|>`` ends. The first header follows
the prompt's own ``<|start|>assistant``, so the output opens with ``<|channel|>``. A message
becomes what vLLM's gpt-oss parser makes of it:

- a recipient naming a function (``functions.N``, or any recipient but ``assistant``): a tool
  call of N, the body its JSON object of arguments; several per answer;
- the ``analysis`` channel: ``reasoning_content`` (content when reasoning is not split out);
- ``final``, and ``commentary`` without a recipient (a preamble before tool calls): content.

Choices, and why:

- ``<|call|>`` and ``<|return|>`` are the model's stop tokens, and a server leaves a stop token
  out of the text it returns: the end of the output ends the last message as they would.
- No marker ever reaches the client: headers are consumed, a stray marker in a body is
  dropped, and text that breaks the format (a header without ``<|message|>``) is content with
  its markers taken out (one that the text on both sides of a marker spells once the marker
  is gone goes at the boundary: ``marker_free``).
- A call whose body is not a JSON object (cut off by the token limit, say) is content: its
  body as text, never dropped. Inside the JSON's strings a marker is text (code that mentions
  ``<|end|>``), so only one outside a string ends the call.
- Text where no header begins (a model that writes no channel) is content, verbatim.
- Messages of one kind join with nothing between them, as vLLM streams them.
"""

from __future__ import annotations

import re
from enum import Enum, auto

from app.protocol.output.deltas import ChatDelta
from app.protocol.output.interface import Format, ParserOptions, Reasoning
from app.protocol.output.json_args import JsonCursor, json_object_text
from app.protocol.output.scanning import find_tag, partial_tag_start
from app.protocol.output.stepping import SteppedParser

START = "<|start|>"
END = "<|end|>"
MESSAGE = "<|message|>"
CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"
RETURN = "<|return|>"
CALL = "<|call|>"

SPECIAL_TOKENS = (START, END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL, "<|endoftext|>")
"""The format's markers and the end of text: special tokens of o200k_harmony, which the
upstream must keep and the client never reads."""
STOP_TOKENS = (CALL, RETURN)
"""Where a turn ends (the model's stop tokens besides ``<|endoftext|>``)."""

_MARKERS = (*SPECIAL_TOKENS, "<|startoftext|>", "<|endofprompt|>")
_ENDS = (END, CALL, RETURN, "<|endoftext|>")
"""Markers that end a message."""
_BEGINS = (START, CHANNEL)
"""Markers that begin the next message's header (ending one whose end marker was lost)."""
_OPENERS = (START, CHANNEL, "to=")
"""How a header may begin; at a message boundary, anything else is a headerless body."""

_CHANNEL_NAME = re.compile(re.escape(CHANNEL) + r"\s*([^\s<]+)")
_RECIPIENT = re.compile(r"(?:^|\s|>)to=([^\s<]+)")
_FUNCTIONS = "functions."
_ANY_MARKER = re.compile("|".join(map(re.escape, _MARKERS)))


class _Kind(Enum):
    HEADER = auto()
    REASONING = auto()
    CONTENT = auto()
    CALL = auto()


class HarmonyParser(SteppedParser):
    """Splits one choice's harmony text into reasoning, content and tool calls (the
    ``ChoiceParser`` protocol). Every split of the same text yields the same fields."""

    def __init__(self, options: ParserOptions) -> None:
        super().__init__(options.id_factory)
        self._options = options
        self._kind = _Kind.HEADER
        self._name = ""  # the function of the call being read
        self._cursor = JsonCursor(stops="<")

    # --- the state machine -------------------------------------------------------------

    def _step(self, out: list[ChatDelta], final: bool) -> bool:
        if self._kind is _Kind.HEADER:
            return self._header(out, final)
        if self._kind is _Kind.CALL:
            return self._call(out, final)
        return self._text(out, final)

    def _header(self, out: list[ChatDelta], final: bool) -> bool:
        """At a message boundary: read a header up to ``<|message|>``, or find none."""
        rest = self._buffer.lstrip()
        if not rest.startswith(_OPENERS):
            if not rest or (not final and any(o.startswith(rest) for o in _OPENERS)):
                if final:
                    self._buffer = ""  # whitespace after the last message: layout
                return False
            self._kind = _Kind.CONTENT  # no header: the model wrote plain text
            return True
        body = rest.find(MESSAGE)
        broken = find_tag(rest if body < 0 else rest[:body], _ENDS)
        if broken is not None:
            # An end marker before any <|message|>: not a header; its text is content.
            at, marker = broken
            self._emit(out, content=_visible(rest[:at]))
            self._buffer = rest[at + len(marker) :]
            return True
        if body < 0:
            if final:
                self._emit(out, content=_visible(rest))
                self._buffer = ""
            return False
        header = rest[:body]
        restart = header.rfind(START)
        if restart > 0:  # a header begun again: what came before it is stray text
            self._emit(out, content=_visible(header[:restart]))
            header = header[restart:]
        self._buffer = rest[body + len(MESSAGE) :]
        self._open(header)
        return True

    def _open(self, header: str) -> None:
        """Set what the message after ``header`` is."""
        channel = _CHANNEL_NAME.search(header)
        recipient = _RECIPIENT.search(header)
        name = recipient.group(1) if recipient else ""
        if name and name != "assistant" and self._options.tool_calls:
            self._name = name.removeprefix(_FUNCTIONS)
            self._cursor = JsonCursor(stops="<")
            self._kind = _Kind.CALL if self._name else _Kind.CONTENT
        elif channel and channel.group(1) == "analysis" and self._options.reasoning:
            self._kind = _Kind.REASONING
        else:
            self._kind = _Kind.CONTENT

    def _text(self, out: list[ChatDelta], final: bool) -> bool:
        """A reasoning or content body, streamed up to the marker that ends it."""
        field = "reasoning" if self._kind is _Kind.REASONING else "content"
        hit = find_tag(self._buffer, _MARKERS)
        if hit is None:
            cut = len(self._buffer) if final else partial_tag_start(self._buffer, _MARKERS)
            self._emit(out, **{field: self._buffer[:cut]})
            self._buffer = self._buffer[cut:]
            return False
        at, marker = hit
        self._emit(out, **{field: self._buffer[:at]})
        if marker in _BEGINS:
            self._buffer = self._buffer[at:]
            self._kind = _Kind.HEADER
        else:
            self._buffer = self._buffer[at + len(marker) :]
            if marker in _ENDS:
                self._kind = _Kind.HEADER
        return True

    def _call(self, out: list[ChatDelta], final: bool) -> bool:
        """A tool call's body, held whole until the marker (outside its strings) that ends
        it, or the end of the output."""
        while (at := self._cursor.scan(self._buffer)) is not None:
            marker = next((m for m in (*_ENDS, *_BEGINS) if self._buffer.startswith(m, at)), None)
            if marker is not None:
                self._end_call(out, at, at if marker in _BEGINS else at + len(marker))
                return True
            if not final and any(m.startswith(self._buffer[at:]) for m in _MARKERS):
                return False  # a marker still arriving
            self._cursor.skip(1)
        if not final:
            return False
        if json_object_text(self._buffer) is None:
            # Not a whole call: up to a marker inside what looked like a string (the JSON's
            # quotes never balanced), else all of it, is text; the rest is parsed again.
            literal = find_tag(self._buffer, (*_ENDS, *_BEGINS))
            if literal is not None:
                at, marker = literal
                self._end_call(out, at, at if marker in _BEGINS else at + len(marker))
                return True
        self._end_call(out, len(self._buffer), len(self._buffer))
        return True

    def _end_call(self, out: list[ChatDelta], body_end: int, resume: int) -> None:
        body, self._buffer = self._buffer[:body_end], self._buffer[resume:]
        self._kind = _Kind.HEADER
        arguments = json_object_text(body)
        if arguments is None:
            self._emit(out, content=_visible(body))
            return
        self._emit_call(out, self._name, arguments)


def _visible(text: str) -> str:
    """``text`` with every marker taken out, and any that taking one out joined up."""
    shown = _ANY_MARKER.sub("", text)
    while shown != text:
        text, shown = shown, _ANY_MARKER.sub("", shown)
    return shown


FORMAT = Format(
    name="harmony",
    template_markers=(START + "assistant", CHANNEL, MESSAGE, CALL),
    reasoning=Reasoning(CHANNEL + "analysis" + MESSAGE, END),
    parser=HarmonyParser,
    special_tokens=SPECIAL_TOKENS,
    stop=STOP_TOKENS,
)
"""gpt-oss's (vLLM's ``openai`` tool parser and ``openai_gptoss`` reasoning parser). Its
reasoning is the analysis channel, never opened by the prompt, which ends at the
``<|start|>assistant`` the channel follows."""
