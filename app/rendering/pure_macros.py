"""Which top-level macros a replayable loop (``app.rendering.loops``) may call, and what a call
reads and writes beyond its arguments.

A top-level macro's free names (those neither its parameters nor bound in it before they are
read) are resolved when it is called, from the template's context: the same values the loop's
caller sees where the loop starts, for a top-level loop cannot rebind them. So a call's output
and effects are a function of its arguments, those free names' values and the namespace
attributes it sets on them; ``MacroEffects`` lists the last two, and ``loops`` adds them to the
loop's own reads and writes. A macro qualifies when that list is complete: it is defined once,
at top level, under a name nothing else binds; it calls only pure globals, methods (the sandbox
refuses mutating ones) and other qualifying macros; it sets attributes only on its own
``namespace()`` objects or on free names (never on a parameter: a caller's namespace); it reads
no ``caller``, ``varargs``, ``kwargs`` or ``loop`` outside its own loops, and no name in its
parameters' defaults (evaluated where it is defined); and it holds none of the nodes a loop
body may not hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from jinja2 import nodes

PURE_GLOBALS = frozenset({"raise_exception", "namespace", "dict", "range"})
IMPURE_FILTERS = frozenset({"random"})
FORBIDDEN = (
    nodes.Break,
    nodes.Continue,
    nodes.Macro,
    nodes.CallBlock,
    nodes.Include,
    nodes.Import,
    nodes.FromImport,
    nodes.Extends,
    nodes.Block,
    nodes.Scope,
    nodes.OverlayScope,
    nodes.ContextReference,
    nodes.DerivedContextReference,
    nodes.ExtensionAttribute,
    nodes.ImportedName,
    nodes.InternalName,
)
_REFUSED_FREE = frozenset({"caller", "varargs", "kwargs", "loop", "self"})


@dataclass(frozen=True)
class MacroEffects:
    """A qualifying macro's free names read (whole values) and namespace attributes set."""

    reads: frozenset[str]
    writes: frozenset[tuple[str, str]]


class Refused(Exception):
    """Why a macro does not qualify."""


def pure_macros(
    statements: list[nodes.Node], globals_: Iterable[str]
) -> tuple[dict[str, tuple[int, MacroEffects]], dict[str, str]]:
    """The qualifying top-level macros of a template body (by name: the index of the statement
    defining it, and its effects, those of the macros it calls included), and why each other
    top-level macro does not qualify."""
    defined = [(i, s) for i, s in enumerate(statements) if isinstance(s, nodes.Macro)]
    bound = _bound_names(statements)
    refused: dict[str, str] = {}
    candidates: dict[str, tuple[int, nodes.Macro]] = {}
    for i, macro in defined:
        if bound.count(macro.name) != 1 or macro.name in set(globals_):
            refused[macro.name] = "its name is bound more than once, or is a global"
        else:
            candidates[macro.name] = (i, macro)
    own: dict[str, tuple[MacroEffects, frozenset[str]]] = {}
    while True:  # the greatest set whose members call only members
        for name, (_, macro) in candidates.items():
            try:
                own[name] = _analyse(macro, frozenset(candidates))
            except Refused as why:
                refused[name] = str(why)
        calls_out = [n for n in candidates if n in refused or not own[n][1] <= set(candidates)]
        if not calls_out:
            break
        for name in calls_out:
            refused.setdefault(name, "it calls a macro that does not qualify")
            del candidates[name]
    out: dict[str, tuple[int, MacroEffects]] = {}
    for name, (index, _) in candidates.items():
        reads: set[str] = set()
        writes: set[tuple[str, str]] = set()
        seen, todo = {name}, [name]
        while todo:
            effects, callees = own[todo.pop()]
            reads |= effects.reads
            writes |= effects.writes
            todo += [c for c in callees if c not in seen]
            seen |= callees
        out[name] = (index, MacroEffects(frozenset(reads), frozenset(writes)))
    return out, refused


def _bound_names(statements: list[nodes.Node]) -> list[str]:
    """Every name the template binds anywhere (macros, sets, loop targets, imports), with
    repetitions."""
    root = nodes.Template(statements)
    names = [m.name for m in root.find_all(nodes.Macro)]
    names += [n.name for n in root.find_all(nodes.Name) if n.ctx in ("store", "param")]
    names += [n.target for n in root.find_all(nodes.Import)]
    for node in root.find_all(nodes.FromImport):
        names += [n if isinstance(n, str) else n[1] for n in node.names]
    return names


def _analyse(macro: nodes.Macro, macros: frozenset[str]) -> tuple[MacroEffects, frozenset[str]]:
    """The macro's own effects and the macros it calls; ``Refused`` if it cannot tell."""
    walk = _Walk(macros, frozenset(a.name for a in macro.args))
    for default in macro.defaults:
        walk.expr(default, {})
        if walk.reads or walk.calls:  # evaluated where the macro is defined, not where called
            raise Refused("a default value reads a name")
    walk.block(macro.body, {a.name: False for a in macro.args})
    return MacroEffects(frozenset(walk.reads), frozenset(walk.writes)), frozenset(walk.calls)


_Scope = dict[str, bool]  # names bound before this point: whether to a ``namespace()`` of its own


class _Walk:
    def __init__(self, macros: frozenset[str], params: frozenset[str]) -> None:
        self.macros = macros
        self.params = params
        self.reads: set[str] = set()
        self.writes: set[tuple[str, str]] = set()
        self.calls: set[str] = set()

    def block(self, statements: list[nodes.Node], scope: _Scope) -> None:
        """Walks statements in order, binding into ``scope`` what they bind for sure."""
        for stmt in statements:
            self.stmt(stmt, scope)

    def stmt(self, node: nodes.Node, scope: _Scope) -> None:
        if isinstance(node, FORBIDDEN):
            raise Refused(f"it holds a {type(node).__name__} node")
        if isinstance(node, nodes.Assign):
            self.expr(node.node, scope)
            self.bind(node.target, scope, _is_namespace_call(node.node))
        elif isinstance(node, nodes.AssignBlock):
            self.block(node.body, dict(scope))
            self.bind(node.target, scope, False)
        elif isinstance(node, nodes.If):
            self.expr(node.test, scope)
            for elif_ in node.elif_:
                self.expr(elif_.test, scope)
            after: list[_Scope] = []
            for body in (node.body, *(e.body for e in node.elif_), node.else_):
                inner = dict(scope)
                self.block(body, inner)
                after.append(inner)
            if node.else_:  # bound for sure after it: what every branch binds
                for name in set.intersection(*(set(s) for s in after)) - set(scope):
                    scope[name] = all(s[name] for s in after)
        elif isinstance(node, nodes.For):
            if node.recursive:
                raise Refused("it holds a recursive loop")
            self.expr(node.iter, scope)
            inner = dict(scope)
            self.bind(node.target, inner, False)
            if node.test is not None:
                self.expr(node.test, inner)
            inner["loop"] = False
            self.block(node.body, inner)
            self.block(node.else_, dict(scope))
        elif isinstance(node, nodes.Output | nodes.ExprStmt):
            for child in node.iter_child_nodes():
                self.expr(child, scope)
        else:
            raise Refused(f"it holds a {type(node).__name__} statement")

    def bind(self, target: nodes.Node, scope: _Scope, namespace: bool) -> None:
        if isinstance(target, nodes.Name):
            scope[target.name] = namespace
        elif isinstance(target, nodes.Tuple):
            for item in target.items:
                self.bind(item, scope, False)
        elif isinstance(target, nodes.NSRef):
            self.set_attribute(target, scope)
        else:
            raise Refused(f"it assigns to a {type(target).__name__}")

    def set_attribute(self, target: nodes.NSRef, scope: _Scope) -> None:
        if target.name in scope:
            if not scope[target.name]:
                raise Refused(f"it sets an attribute of {target.name!r}, not its own namespace")
        elif target.name in self.params:
            raise Refused(f"it sets an attribute of its parameter {target.name!r}")
        else:
            self.free(target.name)
            self.writes.add((target.name, target.attr))

    def expr(self, node: nodes.Node, scope: _Scope) -> None:
        if isinstance(node, FORBIDDEN):
            raise Refused(f"it holds a {type(node).__name__} node")
        if isinstance(node, nodes.Name):
            if node.name not in scope:
                self.free(node.name)
            return
        if isinstance(node, nodes.Call):
            callee = node.node
            if isinstance(callee, nodes.Name):
                if callee.name in scope:
                    raise Refused(f"it calls its own value {callee.name!r}")
                if callee.name in self.macros:
                    self.calls.add(callee.name)
                elif callee.name not in PURE_GLOBALS:
                    raise Refused(f"it calls {callee.name!r}")
            elif not isinstance(callee, nodes.Getattr):
                raise Refused("it calls a value that is not a global, a macro or a method")
        if isinstance(node, nodes.Filter | nodes.Test) and node.name in IMPURE_FILTERS:
            raise Refused(f"it uses {node.name!r}")
        for child in node.iter_child_nodes():
            self.expr(child, scope)

    def free(self, name: str) -> None:
        if name in _REFUSED_FREE:
            raise Refused(f"it reads {name!r}")
        if name not in PURE_GLOBALS and name not in self.macros:
            self.reads.add(name)


def _is_namespace_call(node: nodes.Node) -> bool:
    return (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.Name)
        and node.node.name == "namespace"
    )
