"""Static analysis: which top-level ``{% for %}`` loops of a template can be replayed.

A loop qualifies when its body provably reads nothing but: the item, the ``loop`` attributes
``index``/``index0``/``first``/``last``/``depth``/``depth0``/``previtem``/``nextitem``, outer
names (including namespaces, whose written attributes are tracked as loop state), elements of
outer lists at ``loop.index0 + c`` / ``loop.index + c`` / a constant ``c``, pure globals and
filters (see ``_Reads``), and pure macros, whose reads and writes count as the loop's
(``app.rendering.pure_macros``). Then an iteration's output and namespace writes are a
function of those inputs alone, which is what ``app.rendering.replay`` relies on to replay
unchanged runs of iterations. A namespace attribute that the body never writes and reads only as
``loop.index0 OP ns.attr`` (Qwen3's ``loop.index0 > ns.last_query_index``) is a
``Threshold``: iterations depend on it only through that comparison's outcome. A call
``f(items, loop.index0)`` of a window of ``app.rendering.windows`` on the list the loop walks
reads the items of its ``windows.SPANS``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import jinja2
from jinja2 import nodes
from jinja2.visitor import NodeTransformer

from app.rendering import windows
from app.rendering.pure_macros import (
    FORBIDDEN,
    IMPURE_FILTERS,
    PURE_GLOBALS,
    MacroEffects,
    pure_macros,
)

RUNNER = "__toksplice_loop"
ITEMS, LO, MARK = "__toksplice_items", "__toksplice_lo", "__toksplice_mark"
_LOOP_ATTRS = frozenset(
    {"index", "index0", "first", "last", "depth", "depth0", "previtem", "nextitem"}
)
_COMPARE = frozenset({"eq", "ne", "gt", "gteq", "lt", "lteq"})


@dataclass(frozen=True)
class Threshold:
    """``loop.<attr> <op> <name>.<field>`` (``flipped``: the loop attribute on the right)."""

    name: str
    field: str
    attr: str  # "index0" or "index"
    op: str
    flipped: bool


@dataclass(frozen=True)
class LoopPlan:
    """What one replayable loop's body reads and writes."""

    target: str
    loop_attrs: frozenset[str]
    outer: tuple[str, ...]  # names read as whole values (namespaces included)
    indexed: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # name, (attr, offset)s
    written: tuple[tuple[str, tuple[str, ...]], ...]  # namespace name, attributes set
    thresholds: tuple[Threshold, ...]
    windows: tuple[tuple[str, str], ...]  # (``windows.SPANS`` key, the list it reads)
    macros: tuple[str, ...]  # the pure macros it calls (``app.rendering.pure_macros``)
    body: jinja2.Template  # one iteration, with ``loop`` and the item in its context
    tail: jinja2.Template  # the loop from an iteration on (see ``_plan``)


def plan_loops(
    env: jinja2.Environment, statements: list[nodes.Node]
) -> tuple[list[nodes.Node], list[LoopPlan]]:
    """The top-level ``statements`` with each qualifying top-level loop replaced by a call of the
    runner (``RUNNER(k, iter, {name: value})``, which renders it), and the plans."""
    plans: list[LoopPlan] = []
    body: list[nodes.Node] = []
    macros, _ = pure_macros(statements, env.globals)
    for i, stmt in enumerate(statements):
        defined = {name: effects for name, (at, effects) in macros.items() if at < i}
        plan = _plan(env, stmt, defined) if isinstance(stmt, nodes.For) else None
        if plan is None:
            body.append(stmt)
            continue
        assert isinstance(stmt, nodes.For)
        names = (
            plan.outer
            + tuple(name for name, _ in plan.indexed)
            + tuple(name for _, name in plan.windows)
            + plan.macros
        )
        values = nodes.Dict([nodes.Pair(nodes.Const(n), nodes.Name(n, "load")) for n in names])
        call = nodes.Call(
            nodes.Name(RUNNER, "load"), [nodes.Const(len(plans)), stmt.iter, values], [], None, None
        )
        body.append(nodes.Output([call]).set_lineno(stmt.lineno))
        plans.append(plan)
    return body, plans


def _plan(
    env: jinja2.Environment, loop: nodes.For, macros: dict[str, MacroEffects]
) -> LoopPlan | None:
    if (
        loop.test is not None
        or loop.recursive
        or loop.else_
        or not isinstance(loop.target, nodes.Name)
    ):
        return None
    reads = _Reads(loop.target.name, macros)
    try:
        for stmt in loop.body:
            reads.visit(stmt, outer_loop=True)
    except _NotPure:
        return None
    if reads.lengths:
        return None  # ``name | length`` changes whenever the conversation grows
    indexed_names = set(reads.offsets) - reads.other_use
    indexed = tuple((name, tuple(sorted(reads.offsets[name]))) for name in sorted(indexed_names))
    outer = tuple(sorted(reads.names - indexed_names - set(env.globals)))
    iterated = {n.name for n in loop.iter.find_all(nodes.Name)}
    if isinstance(loop.iter, nodes.Name):
        iterated.add(loop.iter.name)
    if iterated & set(outer):
        return None  # every iteration reads the whole list it walks, which every call extends
    walked = loop.iter.name if isinstance(loop.iter, nodes.Name) else None
    if any(name != walked for _, name in reads.windows):
        return None  # a window's spans are indices of the list the loop walks
    thresholds = tuple(
        t
        for t in reads.thresholds
        if t.name not in reads.whole and (t.name, t.field) not in reads.field_reads | reads.writes
    )
    written: dict[str, set[str]] = {}
    for name, attr in reads.writes:
        written.setdefault(name, set()).add(attr)
    # The tail template: the loop itself over ITEMS[LO:], its body reading the loop attributes
    # of the whole loop (``_FromLo``), calling MARK after each iteration (the caller cuts the
    # output there, and snapshots state).  Sliced, not skipped up to LO: a loop over a long
    # conversation's first thousand items costs more than rendering the few dozen after them.
    mark = nodes.Output([nodes.Call(nodes.Name(MARK, "load"), [], [], None, None)])
    body = [_FromLo().visit(stmt) for stmt in copy.deepcopy(loop.body, {id(env): env})]
    tail = nodes.For(
        loop.target,
        nodes.Getitem(
            nodes.Name(ITEMS, "load"), nodes.Slice(nodes.Name(LO, "load"), None, None), "load"
        ),
        [*body, mark],
        [],
        None,
        False,
    )
    return LoopPlan(
        loop.target.name,
        frozenset(reads.loop_attrs),
        outer,
        indexed,
        tuple((n, tuple(sorted(a))) for n, a in sorted(written.items())),
        thresholds,
        tuple(sorted(reads.windows)),
        tuple(sorted(reads.called)),
        _compile(env, list(loop.body)),
        _compile(env, [tail]),
    )


def _compile(env: jinja2.Environment, statements: list[nodes.Node]) -> jinja2.Template:
    root = nodes.Template(statements)
    root.set_environment(env)
    return env.template_class.from_code(env, env.compile(root), env.make_globals(windows.helpers()))


class _FromLo(NodeTransformer):
    """Rewrites a planned body's reads of its own loop's attributes for a loop over the items
    from LO on: ``index0`` and ``index`` count from LO, ``first`` is ``index0 + LO == 0``;
    ``previtem`` is ``ITEMS[index0 + LO - 1]`` past the first item; ``nextitem``, ``last``
    and ``depth`` are the same in both loops.  Inner loops' bodies read their own;
    their iterables, filters and else blocks read this one."""

    def visit_For(self, node: nodes.For) -> nodes.For:
        node.iter = self.visit(node.iter)
        node.test = self.visit(node.test) if node.test is not None else None
        node.else_ = [self.visit(stmt) for stmt in node.else_]
        return node

    def visit_Getattr(self, node: nodes.Getattr) -> nodes.Node:
        if not _is_name(node.node, "loop"):
            return self.generic_visit(node)
        lo = nodes.Name(LO, "load")
        if node.attr in ("index0", "index"):
            return nodes.Add(node, lo)
        if node.attr == "first":
            index0 = nodes.Getattr(node.node, "index0", "load")
            return nodes.Compare(nodes.Add(index0, lo), [nodes.Operand("eq", nodes.Const(0))])
        if node.attr == "previtem":
            at = nodes.Add(nodes.Getattr(node.node, "index0", "load"), lo)
            before = nodes.Getitem(nodes.Name(ITEMS, "load"), nodes.Sub(at, nodes.Const(1)), "load")
            return nodes.CondExpr(
                nodes.Compare(at, [nodes.Operand("gt", nodes.Const(0))]), before, node
            )
        return node


class _NotPure(Exception):
    pass


class _Reads:
    """Walks a loop body, collecting what it reads; raises ``_NotPure`` if it cannot tell."""

    def __init__(self, target: str, macros: dict[str, MacroEffects]) -> None:
        self.target = target
        self.macros = macros
        self.called: set[str] = set()
        self.names: set[str] = set()
        self.loop_attrs: set[str] = set()
        self.offsets: dict[str, set[tuple[str, int]]] = {}
        self.lengths: set[str] = set()
        self.other_use: set[str] = set()  # names read other than as name[<offset>]
        self.whole: set[str] = set()  # names read other than as name.field
        self.field_reads: set[tuple[str, str]] = set()  # name.field outside thresholds
        self.writes: set[tuple[str, str]] = set()
        self.thresholds: list[Threshold] = []
        self.windows: set[tuple[str, str]] = set()

    def visit(self, node: nodes.Node, outer_loop: bool) -> None:
        if isinstance(node, FORBIDDEN):
            raise _NotPure
        if isinstance(node, nodes.For):
            if node.recursive:
                raise _NotPure
            # Only its body sees the inner loop as ``loop``; its iterable, filter and else
            # block see the enclosing one.
            for child in (node.iter, *node.else_, *([node.test] if node.test else [])):
                self.visit(child, outer_loop)
            for child in node.body:
                self.visit(child, outer_loop=False)
            self.visit(node.target, outer_loop)
        elif isinstance(node, nodes.Name):
            self._name(node, outer_loop)
        elif isinstance(node, nodes.NSRef):
            self.names.add(node.name)
            self.other_use.add(node.name)
            self.writes.add((node.name, node.attr))
        elif isinstance(node, nodes.Getattr) and _is_name(node.node, "loop"):
            if not outer_loop:
                return
            if node.attr not in _LOOP_ATTRS:
                raise _NotPure
            self.loop_attrs.add(node.attr)
        elif (
            isinstance(node, nodes.Getattr)
            and isinstance(node.node, nodes.Name)
            and node.node.name not in ("loop", self.target)
        ):
            self.names.add(node.node.name)
            self.other_use.add(node.node.name)
            self.field_reads.add((node.node.name, node.attr))
        elif outer_loop and (threshold := _threshold(node, self.target)) is not None:
            self.names.add(threshold.name)
            self.other_use.add(threshold.name)
            self.loop_attrs.add(threshold.attr)
            self.thresholds.append(threshold)
        elif (
            isinstance(node, nodes.Getitem)
            and outer_loop
            and isinstance(node.node, nodes.Name)
            and node.node.name not in ("loop", self.target)
            and (offset := _offset(node.arg)) is not None
        ):
            self.offsets.setdefault(node.node.name, set()).add(offset)
            self.names.add(node.node.name)
            self.whole.add(node.node.name)
            self.visit(node.arg, outer_loop)
        elif outer_loop and (window := _window(node, self.target)) is not None:
            self.windows.add(window)
        elif (
            isinstance(node, nodes.Filter)
            and node.name == "length"
            and outer_loop
            and isinstance(node.node, nodes.Name)
            and node.node.name not in ("loop", self.target)
        ):
            self.lengths.add(node.node.name)
        else:
            self._generic(node, outer_loop)

    def _generic(self, node: nodes.Node, outer_loop: bool) -> None:
        if isinstance(node, nodes.Call):
            callee = node.node
            if (
                isinstance(callee, nodes.Name)
                and callee.name not in PURE_GLOBALS
                and callee.name not in self.macros
            ):
                raise _NotPure
            if not isinstance(callee, nodes.Name | nodes.Getattr):
                raise _NotPure
        if isinstance(node, nodes.Filter | nodes.Test) and node.name in IMPURE_FILTERS:
            raise _NotPure
        for child in node.iter_child_nodes():
            self.visit(child, outer_loop)

    def _name(self, node: nodes.Name, outer_loop: bool) -> None:
        if node.name == "loop" and outer_loop:
            raise _NotPure  # the loop object itself escapes
        if node.name == self.target or (node.name == "loop" and not outer_loop):
            return
        effects = self.macros.get(node.name)
        if effects is not None:  # a call reads and writes what the macro does
            self.called.add(node.name)
            self.names |= effects.reads | {name for name, _ in effects.writes}
            self.whole |= effects.reads
            self.other_use |= effects.reads | {name for name, _ in effects.writes}
            self.writes |= effects.writes
            return
        self.names.add(node.name)
        self.whole.add(node.name)
        if node.ctx == "load":
            self.other_use.add(node.name)


def _is_name(node: nodes.Node, name: str) -> bool:
    return isinstance(node, nodes.Name) and node.name == name


def _loop_index(node: nodes.Node) -> str | None:
    if (
        isinstance(node, nodes.Getattr)
        and _is_name(node.node, "loop")
        and node.attr in ("index0", "index")
    ):
        return node.attr
    return None


def _threshold(node: nodes.Node, target: str) -> Threshold | None:
    """``loop.index0 > ns.field`` (either side, one comparison operator) as a Threshold."""
    if not isinstance(node, nodes.Compare) or len(node.ops) != 1 or node.ops[0].op not in _COMPARE:
        return None
    left, right = node.expr, node.ops[0].expr
    for attr_side, other, flipped in ((left, right, False), (right, left, True)):
        attr = _loop_index(attr_side)
        if (
            attr is not None
            and isinstance(other, nodes.Getattr)
            and isinstance(other.node, nodes.Name)
            and other.node.name not in ("loop", target)
        ):
            return Threshold(other.node.name, other.attr, attr, node.ops[0].op, flipped)
    return None


def _window(node: nodes.Node, target: str) -> tuple[str, str] | None:
    """``f(name, loop.index0)`` for a window ``f`` of ``app.rendering.windows``."""
    if not (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.Name)
        and node.node.name in windows.SPANS
        and len(node.args) == 2
        and not (node.kwargs or node.dyn_args or node.dyn_kwargs)
    ):
        return None
    items, at = node.args
    if not isinstance(items, nodes.Name) or items.name in ("loop", target):
        return None
    return (node.node.name, items.name) if _loop_index(at) == "index0" else None


def _offset(arg: nodes.Node) -> tuple[str, int] | None:
    """``loop.index0 + c`` style subscripts as (attr, c); a constant int as ("", c)."""
    if isinstance(arg, nodes.Const) and type(arg.value) is int:
        return ("", arg.value)
    sign = 1 if isinstance(arg, nodes.Add) else -1 if isinstance(arg, nodes.Sub) else 0
    if isinstance(arg, nodes.BinExpr) and sign:
        attr = _loop_index(arg.left)
        if isinstance(arg.right, nodes.Const) and type(arg.right.value) is int and attr:
            return (attr, sign * arg.right.value)
    attr = _loop_index(arg)
    return None if attr is None else (attr, 0)
