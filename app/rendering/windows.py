"""Scans of the conversation inside a loop body, as calls whose reads the memo can bound.

Some templates scan other messages in every turn: gpt-oss asks whether a final answer comes
later (``loop_messages[loop.index:]``), Gemma 4 walks back to the previous turn that is not a
tool result and forward over the tool results that answer the turn's calls. As Jinja those
read the whole list at computed indices, which ``app.rendering.loops`` cannot bound. Each
known scan (``_Shape``: its statements node for node, matched only directly in a top-level
loop's body or in the ``if`` blocks of it, where ``loop`` is that loop) is rewritten as what
it computes:

* a later final answer: ``loop.index0 < <after>.index``, the index of the last one
  (``last_final``, evaluated once before the loop): a ``Threshold`` of the loop;
* the previous turn: ``previous_turn(list, loop.index0)``, the namespace the scan leaves;
* the tool results after a turn: ``for follow in tool_run(list, loop.index0)``, the loop's own
  body (past its ``set follow = ...``) over exactly the items it would have rendered.

A call ``f(list, loop.index0)`` of the last two is a *window* of the loop: iteration ``t``
reads ``list[lo:hi]`` for the ``SPANS[f]`` of the call's list (``hi`` past the list's end: it
read the length), which ``app.rendering.replay`` compares item by item. The functions look at
messages as Jinja would on what vLLM passes (dicts with a string ``role``); anything else
raises ``Unprovable`` and the template renders without the memo.
"""

from __future__ import annotations

import copy
import itertools
import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import jinja2
from jinja2 import nodes

from app.rendering.environment import TemplateNamespace

TOOL_RUN, PREVIOUS_TURN, LAST_FINAL = (
    "__toksplice_tool_run",
    "__toksplice_previous_turn",
    "__toksplice_last_final",
)
_AFTER = "__toksplice_after_"  # + a counter: the namespace holding ``last_final``'s index
_REST = "__toksplice_rest"  # where a shape's statements may be any that do not read the scan's


class Unprovable(Exception):
    """The messages are not what a window's rewrite is proven on: render without the memo."""


def _roles(items: Any) -> list[str]:
    """The messages' roles, as Jinja reads them (``m.role``, ``m['role']``) on dicts holding a
    string role; else ``Unprovable``."""
    if type(items) is not list or not set(map(type, items)) <= {dict}:
        raise Unprovable("the scanned messages are not a list of dicts")
    try:
        roles: list[str] = list(map(_ROLE, items))
    except KeyError:
        raise Unprovable("a scanned message has no role") from None
    if not set(map(type, roles)) <= {str}:
        raise Unprovable("a scanned message's role is not a string")
    return roles


_ROLE = operator.itemgetter("role")


def _role(items: Any, j: int) -> str:
    """``_roles(items)[j]``, reading that message alone."""
    if type(items) is not list or type(message := items[j]) is not dict:
        raise Unprovable("the scanned messages are not a list of dicts")
    role = message.get("role")
    if type(role) is not str:
        raise Unprovable("a scanned message's role is not a string")
    return role


def last_final(items: Any) -> TemplateNamespace:
    """``index``: the last ``j`` with ``items[j].role == 'assistant' and "tool_calls" not in
    items[j]`` (-1 if none): gpt-oss's ``loop_messages[loop.index:]`` holds one iff
    ``loop.index0 < index``."""
    roles = _roles(items)
    last = -1
    for j, (role, message) in enumerate(zip(roles, items, strict=True)):
        if role == "assistant" and "tool_calls" not in message:
            last = j
    return TemplateNamespace(index=last)


def previous_turn(items: Any, t: int) -> TemplateNamespace:
    """Gemma 4's backward scan from ``t``: the role of the last message before it that is not a
    tool result (``found``), else ``None``."""
    for j in range(t - 1, -1, -1):
        role = _role(items, j)
        if role != "tool":
            return TemplateNamespace(role=role, found=True)
    return TemplateNamespace(role=None, found=False)


def tool_run(items: Any, t: int) -> list[Any]:
    """The tool results right after ``t``, up to the next other message (Gemma 4's forward
    scan renders each of them, and stops for good at that message)."""
    if type(items) is not list:
        raise Unprovable("the scanned messages are not a list")
    end = t + 1
    while end < len(items) and _role(items, end) == "tool":
        end += 1
    return items[t + 1 : end]


def _previous_spans(items: Any, n: int) -> list[tuple[int, int]]:
    """Iteration ``t`` of ``previous_turn`` reads from the turn it finds (or 0) up to ``t``."""
    roles = _roles(items)
    spans, last = [], 0
    for t in range(n):
        spans.append((last, t))
        if roles[t] != "tool":
            last = t
    return spans


def _run_spans(items: Any, n: int) -> list[tuple[int, int]]:
    """Iteration ``t`` of ``tool_run`` reads its results and the message that ends them; one
    that runs to the end of the list read its length (``hi`` past the end)."""
    roles = _roles(items)
    spans, stop = [], len(roles)
    for t in range(len(roles) - 1, -1, -1):
        if t < n:
            spans.append((t + 1, stop + 1))
        if roles[t] != "tool":
            stop = t
    return spans[::-1]


SPANS: Mapping[str, Callable[[Any, int], list[tuple[int, int]]]] = MappingProxyType(
    {PREVIOUS_TURN: _previous_spans, TOOL_RUN: _run_spans}
)
"""A window's reads per iteration ``t < n``: the half-open index range of its list."""


def helpers() -> dict[str, Callable[..., Any]]:
    """What the rewritten template calls (bound in the memo's render context)."""
    return {TOOL_RUN: tool_run, PREVIOUS_TURN: previous_turn, LAST_FINAL: last_final}


@dataclass(frozen=True)
class _Shape:
    """Consecutive statements of a loop body, node for node (``_REST``: any statements)."""

    text: str
    rewrite: Callable[[list[nodes.Node], str], list[nodes.Node]]
    after: bool  # whether it needs ``last_final`` of its list before the loop
    unread: str = ""  # a namespace the rewrite leaves otherwise: named nowhere else in the loop
    rest_free: tuple[str, ...] = ()  # names ``_REST`` must not read (the scan's own)


def _index0() -> nodes.Getattr:
    return nodes.Getattr(nodes.Name("loop", "load"), "index0", "load")


def _window(helper: str, items: str) -> nodes.Call:
    return nodes.Call(
        nodes.Name(helper, "load"), [nodes.Name(items, "load"), _index0()], [], None, None
    )


def _later_final(matched: list[nodes.Node], after: str) -> list[nodes.Node]:
    # [set ns = namespace(found=false), for ... if <a later final> set ns.found = true]
    first, scan = matched
    assert isinstance(scan, nodes.For) and isinstance(scan.body[0], nodes.If)
    later = nodes.Compare(
        _index0(), [nodes.Operand("lt", nodes.Getattr(nodes.Name(after, "load"), "index", "load"))]
    )
    return [first, nodes.If(later, scan.body[0].body, [], [])]


def _previous(matched: list[nodes.Node], _: str) -> list[nodes.Node]:
    # [set prev_nt = namespace(role=None, found=false), if loop.index0 > 0: for j ...]
    first, _scan = matched
    assert isinstance(first, nodes.Assign)
    return [nodes.Assign(first.target, _window(PREVIOUS_TURN, "loop_messages"))]


def _follows(matched: list[nodes.Node], _: str) -> list[nodes.Node]:
    # [set flag = namespace(stopped=false), for k in range(...): if/elif/else: set follow; rest]
    first, scan = matched
    assert isinstance(scan, nodes.For)
    branch = scan.body[0]
    assert isinstance(branch, nodes.If)
    rest = branch.else_[1:]
    target = nodes.Name("follow", "store")
    return [first, nodes.For(target, _window(TOOL_RUN, "loop_messages"), rest, [], None, False)]


_SHAPES = (
    _Shape(
        "{%- set future_final_message = namespace(found=false) %}"
        "{%- for future_message in loop_messages[loop.index:] %}"
        "{%- if future_message.role == 'assistant' and \"tool_calls\" not in future_message %}"
        "{%- set future_final_message.found = true %}"
        "{%- endif %}{%- endfor %}",
        _later_final,
        after=True,
    ),
    _Shape(
        "{%- set prev_nt = namespace(role=None, found=false) -%}"
        "{%- if loop.index0 > 0 -%}{%- for j in range(loop.index0 - 1, -1, -1) -%}"
        "{%- if not prev_nt.found -%}{%- if loop_messages[j]['role'] != 'tool' -%}"
        "{%- set prev_nt.role = loop_messages[j]['role'] -%}{%- set prev_nt.found = true -%}"
        "{%- endif -%}{%- endif -%}{%- endfor -%}{%- endif -%}",
        _previous,
        after=False,
    ),
    _Shape(
        "{%- set ns_tool_scan = namespace(stopped=false) -%}"
        "{%- for k in range(loop.index0 + 1, loop_messages | length) -%}"
        "{%- if ns_tool_scan.stopped -%}"
        "{%- elif loop_messages[k]['role'] != 'tool' -%}{%- set ns_tool_scan.stopped = true -%}"
        "{%- else -%}{%- set follow = loop_messages[k] -%}{{ " + _REST + " }}"
        "{%- endif -%}{%- endfor -%}",
        _follows,
        after=False,
        unread="ns_tool_scan",
        rest_free=("loop", "k", "loop_messages"),
    ),
)


def rewrite(env: jinja2.Environment, body: list[nodes.Node]) -> tuple[list[nodes.Node], bool]:
    """``body`` (a template's top-level statements) with the known scans of its top-level
    loops rewritten, and whether any was."""
    shapes = [(shape, env.parse(shape.text).body) for shape in _SHAPES]
    out: list[nodes.Node] = []
    afters = itertools.count()
    changed = False
    for stmt in body:
        rewritten = (
            _rewrite_loop(env, stmt, shapes, afters) if isinstance(stmt, nodes.For) else None
        )
        changed |= rewritten is not None
        out += [stmt] if rewritten is None else rewritten
    return (out, True) if changed else (body, False)


def _rewrite_loop(
    env: jinja2.Environment,
    stmt: nodes.For,
    shapes: list[tuple[_Shape, list[nodes.Node]]],
    afters: Iterator[int],
) -> list[nodes.Node] | None:
    """The loop with its known scans rewritten, after the ``last_final`` it then needs; None
    when it has none."""
    loop = copy.deepcopy(stmt, {id(env): env})
    before: list[nodes.Node] = []
    for shape, pattern in shapes:
        for block in _blocks(loop.body):
            at = _find(block, pattern)
            if at is None:
                continue
            matched = block[at : at + len(pattern)]
            rest = _rest_of(matched, pattern)
            if any(_mentions(rest, name) for name in shape.rest_free):
                continue
            after = f"{_AFTER}{next(afters)}" if shape.after else ""
            replaced = shape.rewrite(matched, after)
            block[at : at + len(pattern)] = replaced
            if shape.unread and _mentions(loop.body, shape.unread) > 1:  # beyond its ``set``
                block[at : at + len(replaced)] = matched
                continue
            if shape.after:
                call = nodes.Call(
                    nodes.Name(LAST_FINAL, "load"),
                    [nodes.Name("loop_messages", "load")],
                    [],
                    None,
                    None,
                )
                before.append(nodes.Assign(nodes.Name(after, "store"), call))
    if repr(loop) == repr(stmt) or _mentions(loop.body, "loop_messages", ctx="store"):
        return None  # nothing known; or the scanned list rebound in an iteration
    return [*(b.set_lineno(stmt.lineno) for b in before), loop]


def _blocks(statements: list[nodes.Node]) -> list[list[nodes.Node]]:
    """``statements`` and the statement lists of the ``if`` blocks in it (where ``loop`` is
    still the loop the statements belong to), as the lists themselves."""
    out = [statements]
    for stmt in statements:
        if isinstance(stmt, nodes.If):
            out += _blocks(stmt.body)
            for branch in stmt.elif_:
                out += _blocks(branch.body)
            out += _blocks(stmt.else_)
    return out


def _find(block: list[nodes.Node], pattern: list[nodes.Node]) -> int | None:
    """Where ``pattern`` starts in ``block``, a ``_REST`` output matching any statements."""
    size = len(pattern)
    for at in range(len(block) - size + 1):
        if all(_same(a, b) for a, b in zip(block[at : at + size], pattern, strict=True)):
            return at
    return None


def _same(node: nodes.Node, pattern: nodes.Node) -> bool:
    return repr(_without_rest(node, pattern)) == repr(pattern)


def _without_rest(node: nodes.Node, pattern: nodes.Node) -> nodes.Node:
    """``node`` with the statements where ``pattern`` has its ``_REST`` replaced by that."""
    holes = _rest_holes(pattern)
    if not holes:
        return node
    node = copy.deepcopy(node)
    for path, keep in holes:
        block = _at(node, path)
        if block is None or len(block) < keep:
            return node
        block[keep:] = _at(pattern, path)[keep:]  # type: ignore[index]
    return node


def _rest_of(matched: list[nodes.Node], pattern: list[nodes.Node]) -> list[nodes.Node]:
    """The statements of ``matched`` that stand for ``_REST`` in ``pattern``."""
    out: list[nodes.Node] = []
    for node, shape in zip(matched, pattern, strict=True):
        for path, keep in _rest_holes(shape):
            block = _at(node, path)
            out += (block or [])[keep:]
    return out


def _rest_holes(pattern: nodes.Node) -> list[tuple[tuple[str | int, ...], int]]:
    """Paths (attribute names and indices) to the statement lists ending in ``_REST``, with
    how many statements precede it."""
    out: list[tuple[tuple[str | int, ...], int]] = []

    def walk(node: nodes.Node, path: tuple[str | int, ...]) -> None:
        for name in ("body", "else_", "elif_"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for i, child in enumerate(block):
                if _is_rest(child):
                    out.append(((*path, name), i))
                elif isinstance(child, nodes.Node):
                    walk(child, (*path, name, i))

    walk(pattern, ())
    return out


def _at(node: nodes.Node, path: tuple[str | int, ...]) -> list[nodes.Node] | None:
    value: Any = node
    for step in path:
        try:
            value = value[step] if isinstance(step, int) else getattr(value, step)
        except (IndexError, AttributeError):
            return None
    return value if isinstance(value, list) else None


def _is_rest(node: nodes.Node) -> bool:
    return (
        isinstance(node, nodes.Output)
        and len(node.nodes) == 1
        and isinstance(node.nodes[0], nodes.Name)
        and node.nodes[0].name == _REST
    )


def _mentions(statements: list[nodes.Node], name: str, ctx: str = "") -> int:
    """How often ``statements`` name ``name``: as a name in context ``ctx`` ("load", "store"),
    or (no ``ctx``) in any context or as a namespace whose attribute is set."""
    named = [n for s in statements for n in s.find_all(nodes.Name) if n.name == name]
    refs = [] if ctx else [n for s in statements for n in s.find_all(nodes.NSRef) if n.name == name]
    return sum(ctx in ("", n.ctx) for n in named) + len(refs)
