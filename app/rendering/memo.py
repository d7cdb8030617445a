"""Exact memoization of a chat template's top-level loops across calls of one session.

Agents resend the whole transcript on every call, so almost every iteration of a template's
``{% for message in messages %}`` renders what it rendered last call. An iteration's output
(and its writes to namespaces) is a deterministic function of: the item, the ``loop``
attributes it reads, the values of the outer names it reads, and the state of the namespaces
it touches. A loop qualifies when static analysis proves that is all it reads (see
``plan_loops``); such a loop is rewritten into a call that renders each iteration through a
separate template compiled from the loop body, keyed on exactly those inputs, and replays a
cached iteration's output and namespace writes on a hit. An outer list read only as
``name[loop.index0 + c]`` / ``name[c]`` / ``name | length`` (Qwen3's look at the neighbouring
messages) is keyed on those elements, not on the whole list. Anything else keeps the loop
as it is.

Keys are type-exact: strings by value, numbers and booleans with their type, containers by
their pickle (which keeps ``1``/``1.0``/``True`` and ``0.0``/``-0.0`` apart).
"""

from __future__ import annotations

import contextlib
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.runtime import Undefined
from jinja2.utils import Namespace

RUNNER = "__toksplice_loop"
GATE = "__toksplice_memoize"
_PROBE_EVERY = 16  # a loop whose memo stopped paying off is retried every this many calls
_STRIKES = 3
# Loop attributes that change for every iteration when the list grows: keys would never hit.
_SHIFTING = frozenset({"length", "revindex", "revindex0"})
_LOOP_ATTRS = frozenset(
    {"index", "index0", "revindex", "revindex0", "first", "last", "length", "depth", "depth0"}
)
_PURE_GLOBALS = frozenset({"raise_exception", "namespace", "dict", "range"})
_IMPURE_FILTERS = frozenset({"random"})
_FORBIDDEN = (
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


class Unkeyable(Exception):
    """A value the memo cannot key exactly; the iteration renders without the memo."""


@dataclass(frozen=True)
class LoopPlan:
    """What one memoizable loop's body reads."""

    target: str
    loop_attrs: tuple[str, ...]
    outer: tuple[str, ...]  # names read as whole values
    indexed: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # name, subscripts read
    body: jinja2.Template


def plan_loops(
    env: jinja2.Environment, root: nodes.Template
) -> tuple[nodes.Template, list[LoopPlan]]:
    """Rewrite each qualifying top-level loop of ``root`` into a runner call."""
    plans: list[LoopPlan] = []
    new_body: list[nodes.Node] = []
    for stmt in root.body:
        plan = _plan(env, stmt) if isinstance(stmt, nodes.For) else None
        if plan is None:
            new_body.append(stmt)
            continue
        assert isinstance(stmt, nodes.For)
        values = nodes.Dict(
            [
                nodes.Pair(nodes.Const(name), nodes.Name(name, "load"))
                for name in plan.outer + tuple(n for n, _ in plan.indexed)
            ]
        )
        k = nodes.Const(len(plans))
        call = nodes.Call(nodes.Name(RUNNER, "load"), [k, stmt.iter, values], [], None, None)
        gate = nodes.Call(nodes.Name(GATE, "load"), [k], [], None, None)
        new_body.append(nodes.If(gate, [nodes.Output([call])], [], [stmt]).set_lineno(stmt.lineno))
        plans.append(plan)
    rewritten = nodes.Template(new_body)
    rewritten.set_environment(env)
    return rewritten, plans


def _plan(env: jinja2.Environment, loop: nodes.For) -> LoopPlan | None:
    if (
        loop.test is not None
        or loop.recursive
        or loop.else_
        or not isinstance(loop.target, nodes.Name)
    ):
        return None
    reads = _Reads(loop.target.name)
    try:
        for stmt in loop.body:
            reads.visit(stmt, outer_loop=True)
    except _NotPure:
        return None
    if reads.lengths or reads.loop_attrs & _SHIFTING:
        return None  # every key changes whenever the conversation grows
    indexed = tuple(
        (name, tuple(sorted(reads.offsets[name]))) for name in sorted(reads.index_only())
    )
    outer = tuple(sorted(reads.names - {n for n, _ in indexed} - set(env.globals)))
    body = nodes.Template(list(loop.body))
    body.set_environment(env)
    template = env.template_class.from_code(env, env.compile(body), env.make_globals(None))
    return LoopPlan(loop.target.name, tuple(sorted(reads.loop_attrs)), outer, indexed, template)


class _NotPure(Exception):
    pass


class _Reads:
    """Walks a loop body, collecting what it reads; raises ``_NotPure`` if it cannot tell."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.names: set[str] = set()
        self.loop_attrs: set[str] = set()
        self.offsets: dict[str, set[tuple[str, int]]] = {}
        self.lengths: set[str] = set()
        self.other_use: set[str] = set()

    def index_only(self) -> set[str]:
        return set(self.offsets) - self.other_use

    def visit(self, node: nodes.Node, outer_loop: bool) -> None:
        if isinstance(node, _FORBIDDEN):
            raise _NotPure
        if isinstance(node, nodes.For):
            if node.recursive:
                raise _NotPure
            self.visit(node.iter, outer_loop)
            for child in (*node.body, *node.else_, *([node.test] if node.test else [])):
                self.visit(child, outer_loop=False)
            self.visit(node.target, outer_loop)
            return
        if isinstance(node, nodes.Name):
            self._name(node, outer_loop)
            return
        if isinstance(node, nodes.NSRef):
            self.names.add(node.name)
            self.other_use.add(node.name)
            return
        if isinstance(node, nodes.Getattr) and _is_name(node.node, "loop"):
            if outer_loop and node.attr not in _LOOP_ATTRS:
                raise _NotPure
            if outer_loop:
                self.loop_attrs.add(node.attr)
                return
        if isinstance(node, nodes.Call):
            callee = node.node
            if isinstance(callee, nodes.Name) and callee.name not in _PURE_GLOBALS:
                raise _NotPure
            if not isinstance(callee, nodes.Name | nodes.Getattr):
                raise _NotPure
        if isinstance(node, nodes.Filter | nodes.Test) and node.name in _IMPURE_FILTERS:
            raise _NotPure
        if isinstance(node, nodes.Getitem) and isinstance(node.node, nodes.Name) and outer_loop:
            offset = _offset(node.arg)
            if offset is not None and node.node.name not in ("loop", self.target):
                self.offsets.setdefault(node.node.name, set()).add(offset)
                self.names.add(node.node.name)
                self.visit(node.arg, outer_loop)
                return
        if (
            isinstance(node, nodes.Filter)
            and node.name == "length"
            and outer_loop
            and isinstance(node.node, nodes.Name)
            and node.node.name not in ("loop", self.target)
        ):
            self.lengths.add(node.node.name)
            self.names.add(node.node.name)
            return
        for child in node.iter_child_nodes():
            self.visit(child, outer_loop)

    def _name(self, node: nodes.Name, outer_loop: bool) -> None:
        if node.name == "loop" and outer_loop:
            raise _NotPure  # the loop object itself escapes
        if node.name == self.target or (node.name == "loop" and not outer_loop):
            return
        self.names.add(node.name)
        if node.ctx == "load":
            self.other_use.add(node.name)


def _is_name(node: nodes.Node, name: str) -> bool:
    return isinstance(node, nodes.Name) and node.name == name


def _offset(arg: nodes.Node) -> tuple[str, int] | None:
    """``loop.index0 + c`` style subscripts as (attr, c); a constant int as ("", c)."""
    if isinstance(arg, nodes.Const) and type(arg.value) is int:
        return ("", arg.value)
    sign = 1 if isinstance(arg, nodes.Add) else -1 if isinstance(arg, nodes.Sub) else 0
    if isinstance(arg, nodes.BinExpr) and sign:
        base, const = arg.left, arg.right
        if (
            isinstance(const, nodes.Const)
            and type(const.value) is int
            and isinstance(base, nodes.Getattr)
            and _is_name(base.node, "loop")
            and base.attr in ("index0", "index")
        ):
            return (base.attr, sign * const.value)
    if (
        isinstance(arg, nodes.Getattr)
        and _is_name(arg.node, "loop")
        and arg.attr in ("index0", "index")
    ):
        return (arg.attr, 0)
    return None


def fingerprint(value: Any) -> Any:
    """A hashable, type-exact stand-in for a template value."""
    kind = type(value)
    if kind is str:
        return value
    if kind is int or kind is bool or value is None:
        return (kind, value)
    if kind is float:
        return (kind, repr(value))
    if isinstance(value, Undefined):
        return (Undefined, kind, value._undefined_name)
    if kind is dict or kind is list:
        try:
            return (kind, pickle.dumps(value, protocol=5))
        except Exception as exc:
            raise Unkeyable from exc
    raise Unkeyable(kind.__name__)


_Writes = tuple[tuple[int, str, Any], ...]  # (namespace position, attribute, new value)


@dataclass
class SessionMemo:
    """One session's memo: iteration entries per (loop, outer-values key); size in chars."""

    tables: dict[tuple[int, Any], dict[Any, tuple[str, _Writes]]] = field(default_factory=dict)
    # (content format, pickle of the request message) -> the prepared message, and the
    # prepared messages' keys by id (they are kept alive here, so ids are stable).
    prepared: dict[tuple[str, bytes], dict[str, Any]] = field(default_factory=dict)
    item_keys: dict[int, Any] = field(default_factory=dict)
    # loop -> (memoized runs in a row that mostly missed, calls since the last one)
    stats: dict[int, tuple[int, int]] = field(default_factory=dict)
    size: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        self.tables.clear()
        self.prepared.clear()
        self.item_keys.clear()
        self.size = 0

    def should_memoize(self, k: int) -> bool:
        misses, since = self.stats.get(k, (0, 0))
        self.stats[k] = (misses, since + 1)
        return misses < _STRIKES or since % _PROBE_EVERY == _PROBE_EVERY - 1

    def record(self, k: int, rate: float) -> None:
        """A memoized run's hit rate. A few bad runs in a row (each new user turn of Qwen3
        changes every key once) turn the memo off for that loop until the next probe."""
        misses, _ = self.stats.get(k, (0, 0))
        self.stats[k] = (misses + 1 if rate < 0.5 else 0, 0)

    def prepare(
        self, messages: Any, fmt: str, prepare_one: Callable[[int, Any], dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Prepared messages, reusing the objects of earlier calls for unchanged messages."""
        out = []
        for i, message in enumerate(messages):
            try:
                key = (fmt, pickle.dumps(message, protocol=5))
            except Exception:
                out.append(prepare_one(i, message))
                continue
            found = self.prepared.get(key)
            if found is None:
                found = self.prepared[key] = prepare_one(i, message)
                self.item_keys[id(found)] = (dict, key[1])
                self.size += len(key[1])
            out.append(found)
        return out


class RenderCache:
    """Bounded, thread-safe store of per-session loop memos (LRU by session, char-bounded).

    ``max_chars`` bounds the rendered text held over all sessions (a session larger than a
    quarter of it is dropped and starts over).
    """

    def __init__(self, *, max_sessions: int = 256, max_chars: int = 256_000_000) -> None:
        self.max_sessions = max_sessions
        self.max_chars = max_chars
        self._sessions: OrderedDict[str, SessionMemo] = OrderedDict()
        self._lock = threading.Lock()

    def session(self, key: str) -> SessionMemo:
        with self._lock:
            memo = self._sessions.pop(key, None) or SessionMemo()
            self._sessions[key] = memo
            while len(self._sessions) > self.max_sessions or (
                self._total() > self.max_chars and len(self._sessions) > 1
            ):
                self._sessions.popitem(last=False)
            return memo

    def account(self, memo: SessionMemo) -> None:
        """After a render: keep ``memo`` within its share, then the store within bounds."""
        with self._lock:
            if memo.size > self.max_chars // 4:
                memo.clear()
            while self._total() > self.max_chars and len(self._sessions) > 1:
                self._sessions.popitem(last=False)

    def _total(self) -> int:
        return sum(m.size for m in self._sessions.values())

    def __len__(self) -> int:
        return len(self._sessions)


def bind(context: dict[str, Any], plans: list[LoopPlan], memo: SessionMemo) -> None:
    """Put the callables the rewritten template invokes into its render ``context``."""

    def run(k: int, items: Any, values: dict[str, Any]) -> str:
        return _run_loop(plans[k], k, items, values, memo)

    context[RUNNER] = run
    context[GATE] = memo.should_memoize


def _run_loop(plan: LoopPlan, k: int, items: Any, values: dict[str, Any], memo: SessionMemo) -> str:
    items = list(items)
    n = len(items)
    spaces = [(name, v) for name, v in values.items() if isinstance(v, Namespace)]
    try:
        outer_key = tuple(
            fingerprint(values[name])
            for name in plan.outer
            if not isinstance(values[name], Namespace)
        )
        lists = [(values[name], offsets) for name, offsets in plan.indexed]
        if any(type(v) is not list for v, _ in lists):
            raise Unkeyable("indexed value is not a list")
    except Unkeyable:
        return "".join(_render(plan, items, i, values) for i in range(n))
    table = memo.tables.setdefault((k, outer_key), {})
    item_keys = memo.item_keys
    fresh = not table  # a first run has nothing to hit: it says nothing about the hit rate
    hits = 0
    out: list[str] = []
    for i, item in enumerate(items):
        try:
            key = _key(plan, i, n, item, lists, spaces, item_keys)
        except Unkeyable:
            out.append(_render(plan, items, i, values))
            continue
        hit = table.get(key)
        if hit is not None:
            hits += 1
            out.append(hit[0])
            for j, name, value in hit[1]:
                spaces[j][1][name] = value
            continue
        before = [dict(_attrs(space)) for _, space in spaces]
        text = _render(plan, items, i, values)
        with contextlib.suppress(Unkeyable):
            table[key] = (text, _writes(spaces, before))
        memo.size += len(text) + 64
        out.append(text)
    memo.record(k, 1.0 if fresh or not n else hits / n)
    return "".join(out)


def _writes(spaces: list[tuple[str, Namespace]], before: list[dict[str, Any]]) -> _Writes:
    """What an iteration changed in the namespaces, by their position in ``spaces``."""
    return tuple(
        (j, name, value)
        for j, ((_, space), old) in enumerate(zip(spaces, before, strict=True))
        for name, value in _attrs(space).items()
        if name not in old or fingerprint(old[name]) != fingerprint(value)
    )


def _key(
    plan: LoopPlan,
    i: int,
    n: int,
    item: Any,
    lists: list[Any],
    spaces: list[tuple[str, Namespace]],
    item_keys: dict[int, Any],
) -> tuple[Any, ...]:
    parts: list[Any] = [_item_key(item, item_keys)]
    parts.extend(_LOOP_VALUES[attr](i, n) for attr in plan.loop_attrs)
    for seq, offsets in lists:
        for attr, offset in offsets:
            j = (i if attr == "index0" else i + 1) + offset if attr else offset
            try:
                parts.append(_item_key(seq[j], item_keys))
            except IndexError:
                parts.append(IndexError)
    for _, space in spaces:
        parts.append(tuple((name, fingerprint(v)) for name, v in _attrs(space).items()))
    return tuple(parts)


_LOOP_VALUES: dict[str, Callable[[int, int], Any]] = {
    "index0": lambda i, n: i,
    "index": lambda i, n: i + 1,
    "first": lambda i, n: i == 0,
    "last": lambda i, n: i == n - 1,
    "length": lambda i, n: n,
    "revindex": lambda i, n: n - i,
    "revindex0": lambda i, n: n - i - 1,
    "depth": lambda i, n: 1,
    "depth0": lambda i, n: 0,
}


def _item_key(value: Any, known: dict[int, Any]) -> Any:
    """An item's key: the prepared messages' are known by id; others are fingerprinted."""
    found = known.get(id(value))
    return found if found is not None else fingerprint(value)


def _attrs(space: Namespace) -> dict[str, Any]:
    attrs: dict[str, Any] = object.__getattribute__(space, "_Namespace__attrs")
    return attrs


def _render(plan: LoopPlan, items: list[Any], i: int, values: dict[str, Any]) -> str:
    context = {**values, plan.target: items[i], "loop": _LoopView(i, len(items))}
    return plan.body.render(context)


class _LoopView:
    """The ``loop`` attributes a memoizable body may read, as jinja's ``LoopContext`` has
    them for a top-level, non-recursive loop over a list."""

    __slots__ = ("first", "index", "index0", "last", "length", "revindex", "revindex0")
    depth = 1
    depth0 = 0

    def __init__(self, i: int, n: int) -> None:
        self.index0 = i
        self.index = i + 1
        self.first = i == 0
        self.last = i == n - 1
        self.length = n
        self.revindex = n - i
        self.revindex0 = n - i - 1
