"""Qwen3's reverse scan for the last user query, computed in Python.

Qwen3-family templates open with a loop over ``messages[::-1]`` that finds the last user
message that is not a wrapped tool response. It only writes two namespace attributes, yet
as Jinja it costs ~1.7 us per message on every call. A top-level loop whose AST is exactly
one of ``_SHAPES`` (node for node, whitespace control included: no output) is replaced by
``{% if not SCANNER(messages, ns, k) %}<the loop>{% endif %}``: ``scan`` does what the loop
does and returns True, or changes nothing and returns False (inputs it does not prove it
handles identically: then the loop itself runs).
"""

from __future__ import annotations

import jinja2
from jinja2 import nodes
from jinja2.utils import Namespace

SCANNER = "__toksplice_scan"
_HEAD = (
    "{%- for message in messages[::-1] %}"
    "{%- set index = (messages|length - 1) - loop.index0 %}"
    '{%- if ns.multi_step_tool and message.role == "user" and '
)
_TAIL = (
    "not(message.content.startswith('<tool_response>') and "
    "message.content.endswith('</tool_response>')) %}"
    "{%- set ns.multi_step_tool = false %}"
    "{%- set ns.last_query_index = index %}"
    "{%- endif %}{%- endfor %}"
)
# (loop text, whether it tests ``message.content is string`` first: Qwen3-2507, -Coder)
_SHAPES = ((_HEAD + _TAIL, False), (_HEAD + "message.content is string and " + _TAIL, True))


def shapes(env: jinja2.Environment) -> dict[str, bool]:
    """The known loops' ``repr`` (Jinja nodes print their fields, not line numbers)."""
    return {repr(env.parse(text).body[0]): checks for text, checks in _SHAPES}


def rewrite(body: list[nodes.Node], known: dict[str, bool]) -> tuple[list[nodes.Node], bool]:
    """``body`` with each known top-level scan guarded by the scanner; whether any was."""
    out: list[nodes.Node] = []
    found = False
    for stmt in body:
        checks = known.get(repr(stmt)) if isinstance(stmt, nodes.For) else None
        if checks is None:
            out.append(stmt)
            continue
        call = nodes.Call(
            nodes.Name(SCANNER, "load"),
            [nodes.Name("messages", "load"), nodes.Name("ns", "load"), nodes.Const(checks)],
            [],
            None,
            None,
        )
        out.append(nodes.If(nodes.Not(call), [stmt], [], []).set_lineno(stmt.lineno))
        found = True
    return out, found


def scan(messages: object, ns: object, checks_string: bool) -> bool:
    """Run the scan on ``ns`` if every step is provably the Jinja loop's; else leave ``ns``.

    Jinja reads ``message.role`` of a dict as its key (the sandbox's ``getattr``), compares
    strings with ``==`` and calls ``str.startswith``/``endswith``: the same operations here.
    Anything else (a role that is not a ``str``, content that is not a ``str`` where the
    loop would call its methods, a namespace flag that is not exactly ``True``) declines.
    """
    if not isinstance(ns, Namespace) or type(messages) is not list:
        return False
    attrs: dict[str, object] = object.__getattribute__(ns, "_Namespace__attrs")
    if attrs.get("multi_step_tool") is not True:
        return False
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if type(message) is not dict or type(message.get("role")) is not str:
            return False
        if message["role"] != "user":
            continue
        content = message.get("content")
        if type(content) is not str:
            if checks_string and not isinstance(content, str):
                continue
            return False
        if not (content.startswith("<tool_response>") and content.endswith("</tool_response>")):
            ns["multi_step_tool"] = False
            ns["last_query_index"] = index
            return True
    return True
