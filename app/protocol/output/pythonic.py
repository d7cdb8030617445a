"""Pythonic tool calls (Llama 4, Llama 3.2, Gemma 3 with vLLM's pythonic template).

    [get_weather(city="Paris", days=[1, 2]), get_time()]
    <|python_start|>[get_weather(city="Paris")]<|python_end|>      (Llama 4, special tokens)

A list of calls with keyword arguments only, written as Python literals. It is read with
``ast.parse`` and only literal nodes are accepted (``python_literals``: strings, numbers,
booleans, ``None``, lists, tuples, sets, dicts with string keys, a sign before a number, and
the JSON names ``true``/``false``/``null`` some models write): nothing is ever evaluated. A
list opens the answer (after whitespace) or follows ``<|python_start|>``; anything that is
not such a list is content, as in vLLM.
"""

from __future__ import annotations

import ast
import re
from functools import partial
from typing import Any

from app.protocol.output.interface import Call, Format, Schemas, TagCalls
from app.protocol.output.leading import LeadingCallsParser
from app.protocol.output.python_literals import NotLiteral, literal_value, parse_expression
from app.protocol.output.schema import encode_call

PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"
LIST_START = "["
TEMPLATE_INSTRUCTION = "[func_name1("
"""What the pythonic chat templates (Llama 4, vLLM's Gemma 3 example) show the model."""

_OUTSIDE = re.compile(r"[\[\](){}'\"#]")
_OPENERS = "[({"
_STRING_ENDS = {quote: re.compile(r"\\|" + re.escape(quote)) for quote in ("'", '"', "'''", '"""')}
"""Where a string that opened with the key may end: its quote, or a backslash to skip."""


class PythonListEnd:
    """Finds where a Python list that starts at the body's first ``[`` ends.

    Brackets are counted outside string literals (``'``, ``"``, triple-quoted, with
    backslash escapes) and comments. A ``<|python_end|>`` after the list (Llama 4 closes its
    ``<|python_start|>`` so) ends the block with it.
    """

    def __init__(self) -> None:
        self._pos = 0
        self._depth = 0
        self._quote: str | None = None  # the open string's delimiter
        self._list_end: int | None = None

    def find(self, body: str) -> int | None:
        """Where the block ends in ``body``, if known yet."""
        if self._list_end is None:
            self._list_end = self._scan(body)
            if self._list_end is None:
                return None
        rest = body[self._list_end :].lstrip()
        if rest.startswith(PYTHON_END):
            return len(body) - len(rest) + len(PYTHON_END)
        if rest and not PYTHON_END.startswith(rest):
            return self._list_end
        return None

    def _scan(self, body: str) -> int | None:
        while True:
            if self._quote is not None:
                if not self._scan_string(body):
                    return None
                continue
            match = _OUTSIDE.search(body, self._pos)
            if match is None:
                self._pos = len(body)
                return None
            at, char = match.start(), match.group()
            if char == "#":
                newline = body.find("\n", at)
                if newline < 0:
                    self._pos = at
                    return None
                self._pos = newline + 1
            elif char in "'\"":
                if body.startswith(char * 3, at):
                    self._quote, self._pos = char * 3, at + 3
                elif len(body) - at < 3 and (char * 3).startswith(body[at:]):
                    self._pos = at  # maybe a triple quote still arriving
                    return None
                else:
                    self._quote, self._pos = char, at + 1
            else:
                self._pos = at + 1
                self._depth += 1 if char in _OPENERS else -1
                if self._depth <= 0:
                    return self._pos

    def _scan_string(self, body: str) -> bool:
        """Moves past the open string's end; ``False`` while it has not arrived."""
        assert self._quote is not None
        ends = _STRING_ENDS[self._quote]
        pos = self._pos
        while True:
            match = ends.search(body, pos)
            if match is None:
                self._pos = max(pos, len(body) - len(self._quote) + 1)
                return False
            at = match.start()
            if body[at] == "\\":
                if at + 1 >= len(body):
                    self._pos = at
                    return False
                pos = at + 2
                continue
            self._pos = at + len(self._quote)
            self._quote = None
            return True


def _function_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _function_name(node.value) + "." + node.attr
    raise NotLiteral("not a function name")


def _call(node: ast.expr) -> Call:
    if not isinstance(node, ast.Call) or node.args:
        raise NotLiteral("not a call with keyword arguments")
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None or keyword.arg in arguments:
            raise NotLiteral("**kwargs or a repeated keyword")
        arguments[keyword.arg] = literal_value(keyword.value)
    encoded = encode_call(_function_name(node.func), arguments)
    if encoded is None:
        raise NotLiteral("not UTF-8")
    return encoded


def decode_pythonic(block: str, schemas: Schemas) -> list[Call] | None:
    """The calls in a block (``[...]``, with the Llama 4 tags around it or not); ``None``
    unless it is one non-empty list of calls (literals carry their own types: no
    ``schemas``)."""
    text = block.strip().removeprefix(PYTHON_START).removesuffix(PYTHON_END).strip()
    try:
        tree = parse_expression(text)
        if not isinstance(tree, ast.List) or not tree.elts:
            return None
        return [_call(node) for node in tree.elts]
    except (ValueError, RecursionError):
        return None


CALLS = TagCalls(
    opens=(PYTHON_START,),
    close=None,
    block_end=PythonListEnd,
    decode=decode_pythonic,
)

FORMAT = Format(
    name="pythonic",
    template_markers=(TEMPLATE_INSTRUCTION,),
    reasoning=None,
    parser=partial(LeadingCallsParser, leading=LIST_START, calls=CALLS),
    special_tokens=(PYTHON_START, PYTHON_END),  # Llama 4's; Gemma 3 writes no marker
)
