"""Rendering a planned loop (``app.rendering.loops``) by replaying the previous call's run.

The output is kept per iteration. For a run of iterations ``[i, j)`` whose inputs are
provably the previous call's, the previous call's pieces for ``[i, j)`` are reused and its
namespace state after ``j - 1`` restored. Other iterations are rendered: alone, through the
loop body compiled as its own template with the ``loop`` attributes it may read, or, from
some iteration to the end when that is a long stretch, by the loop itself
(``LoopPlan.tail``). By induction over ``[i, j)``: iteration ``t`` renders the same text
and leaves the same state when it starts from the same state and reads the same values,
and (``LoopPlan``) it reads only

* the item ``t`` and neighbours ``t + c``: the same objects when they lie in the common
  prefix of this and the previous call's lists (prepared messages are reused, never
  mutated), and not negative (Python would wrap to the list's end);
* ``loop.index``/``index0``/``first``/``depth``: functions of ``t``; ``loop.last``: the same
  while ``t`` is below both calls' last index; ``loop.previtem``/``nextitem``: the items
  ``t - 1`` (none for ``t = 0``) and ``t + 1`` (below both calls' last index), checked as the
  item ``t`` is;
* the items of each window's span (``app.rendering.windows``): the same objects, and inside
  both calls' lists (a span past the end read the list's length);
* outer values and namespace attributes the loop does not write: equal at loop entry
  (type-exact fingerprints) and unchanged by the loop; thresholds: the comparison has the
  same outcome for ``t`` under the old and the new integer;
* namespace attributes the loop writes: the state, equal at ``i`` (checked), then by
  induction.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import pickle
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from jinja2.runtime import Undefined
from jinja2.utils import Namespace

from app.pieced_text import equal_prefix
from app.rendering.loops import ITEMS, LO, MARK, LoopPlan, Threshold
from app.rendering.windows import SPANS

_OPS: Mapping[str, Callable[[Any, Any], Any]] = MappingProxyType(
    {
        "eq": operator.eq,
        "ne": operator.ne,
        "gt": operator.gt,
        "gteq": operator.ge,
        "lt": operator.lt,
        "lteq": operator.le,
    }
)
_TAIL_MIN = 32  # iterations from which the tail is rendered as one loop
_State = tuple[dict[str, Any], ...]  # per written namespace: its written attributes


class Unkeyable(Exception):
    """A value the memo cannot compare exactly; the loop renders without replay."""


def fingerprint(value: Any) -> Any:
    """A comparable, type-exact stand-in for a template value."""
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


@dataclass
class LoopRun:
    """What one call's run of a loop leaves for the next call to replay."""

    items: list[Any]
    lists: tuple[list[Any], ...]  # the indexed lists' values, then the windows'
    entry: Any  # fingerprint of the outer values (thresholds apart) at loop entry
    thresholds: tuple[int, ...]
    pieces: list[str]  # pieces[t]: iteration t's output
    nbytes: int  # what their strings hold in memory (``sys.getsizeof``: UCS-4 text is 4x ASCII)
    states: list[_State]  # states[t]: the written namespace attributes after iteration t
    start: _State  # ... before iteration 0
    replayed: int  # iterations copied rather than rendered (for tests and benchmarks)


def run_loop(
    plan: LoopPlan,
    items: Any,
    values: dict[str, Any],
    previous: LoopRun | None,
    owned: list[Any],
) -> tuple[list[str], LoopRun | None]:
    """The loop's output, one piece per iteration (left unjoined: the template splices them
    into its output, so a megabyte of text is copied once, not three times), and the run to
    keep (None when its inputs cannot be compared). ``owned``: the prepared messages, the
    only objects whose identity proves their content (the memo made them and nothing mutates
    them; a caller's object may be edited in place between calls)."""
    items = items if type(items) is list else list(items)
    written = [
        (_attrs(values[name]), attrs)
        for name, attrs in plan.written
        if isinstance(values.get(name), Namespace)
    ]
    try:
        entry, limits = _entry(plan, values)
    except Unkeyable:
        pieces: list[str] = []
        _tail(plan, items, 0, values, pieces, [], written)
        return pieces, None
    lists = tuple(values[name] for name, _ in plan.indexed) + tuple(
        values[name] for _, name in plan.windows
    )
    start = _state(written)
    if previous is not None and (
        previous.entry != entry or any(type(v) is not list for v in lists)
    ):
        previous = None
    blocks = [] if previous is None else _blocks(plan, items, lists, limits, previous, owned)
    pieces = []
    states: list[_State] = []
    replayed = t = 0
    for lo, hi in blocks:
        while t < lo:
            _step(plan, items, t, values, pieces, states, written)
            t += 1
        assert previous is not None
        if not _same_state(
            states[t - 1] if t else start, previous.states[t - 1] if t else previous.start
        ):
            continue
        pieces += previous.pieces[t:hi]
        states += previous.states[t:hi]
        for (live, _), saved in zip(written, states[-1], strict=True):
            live.update(saved)
        replayed += hi - t
        t = hi
    if len(items) - t >= _TAIL_MIN:
        _tail(plan, items, t, values, pieces, states, written)
    else:
        for u in range(t, len(items)):
            _step(plan, items, u, values, pieces, states, written)
    nbytes = _total_bytes(pieces, previous)
    return pieces, LoopRun(items, lists, entry, limits, pieces, nbytes, states, start, replayed)


def _total_bytes(pieces: list[str], previous: LoopRun | None) -> int:
    """``sum(map(sys.getsizeof, pieces))``, reading only the pieces past those the previous run
    holds at the same positions (the replayed ones: the same objects, compared without a read)."""
    if previous is None:
        return sum(map(sys.getsizeof, pieces))
    k = equal_prefix(pieces, previous.pieces)
    old = sum(map(sys.getsizeof, previous.pieces[k:]))
    return previous.nbytes - old + sum(map(sys.getsizeof, pieces[k:]))


def _step(
    plan: LoopPlan,
    items: list[Any],
    t: int,
    values: dict[str, Any],
    pieces: list[str],
    states: list[_State],
    written: list[tuple[dict[str, Any], tuple[str, ...]]],
) -> None:
    pieces.append(_render(plan, items, t, values))
    states.append(_state(written))


def _tail(
    plan: LoopPlan,
    items: list[Any],
    lo: int,
    values: dict[str, Any],
    pieces: list[str],
    states: list[_State],
    written: list[tuple[dict[str, Any], tuple[str, ...]]],
) -> None:
    """Iterations ``lo`` on, rendered by the loop itself (``LoopPlan.tail``): one Jinja loop
    is much cheaper than as many templates, for a first call or a long changed stretch."""
    marker = f"<end of iteration {lo}>"  # a fresh object: compared by identity

    def mark() -> str:
        states.append(_state(written))
        return marker

    context = {**values, ITEMS: items, LO: lo, MARK: mark}
    current: list[str] = []
    for piece in plan.tail.root_render_func(plan.tail.new_context(context)):
        if piece is marker:
            pieces.append("".join(current))
            current = []
        else:
            current.append(piece)


def _entry(plan: LoopPlan, values: dict[str, Any]) -> tuple[Any, tuple[int, ...]]:
    """The fingerprint of the outer values a loop run depends on, thresholds apart, and the
    thresholds' integers (a threshold whose value is not an ``int`` is fingerprinted).
    A namespace seen under two names is refused: writes through one would go unseen."""
    spaces = [id(v) for v in values.values() if isinstance(v, Namespace)]
    if len(set(spaces)) != len(spaces):
        raise Unkeyable("aliased namespace")
    limits: list[int] = []
    skip: set[tuple[str, str]] = set()
    for threshold in plan.thresholds:
        space = values.get(threshold.name)
        value = _attrs(space).get(threshold.field) if isinstance(space, Namespace) else None
        if type(value) is not int:
            return _entry(dataclasses.replace(plan, thresholds=()), values)
        limits.append(value)
        skip.add((threshold.name, threshold.field))
    parts = []
    for name in plan.outer:
        value = values[name]
        if isinstance(value, Namespace):
            parts.append(
                tuple(
                    (k, fingerprint(v)) for k, v in _attrs(value).items() if (name, k) not in skip
                )
            )
        else:
            parts.append(fingerprint(value))
    return (len(limits), tuple(parts)), tuple(limits)


def _blocks(
    plan: LoopPlan,
    items: list[Any],
    lists: tuple[list[Any], ...],
    limits: tuple[int, ...],
    previous: LoopRun,
    owned: list[Any],
) -> list[tuple[int, int]]:
    """Maximal runs ``[lo, hi)`` of iterations whose reads are the previous call's: not just
    the common prefix, so an edit near the start (Claude Code's billing line) leaves the
    iterations after it replayable."""
    reads = _same_at(items, previous.items, owned)
    n = len(reads)
    if "last" in plan.loop_attrs or "nextitem" in plan.loop_attrs:
        n = min(n, len(items) - 1, len(previous.items) - 1)
    ok = reads[: max(n, 0)]
    if "previtem" in plan.loop_attrs:
        ok[1:] = map(operator.and_, ok[1:], reads)
    if "nextitem" in plan.loop_attrs:
        ok = list(map(operator.and_, ok, reads[1:]))
    indexed = len(plan.indexed)
    for (helper, _), seq, old in zip(
        plan.windows, lists[indexed:], previous.lists[indexed:], strict=True
    ):
        same = reads if seq is items and old is previous.items else _same_at(seq, old, owned)
        ok = _within(ok, same, SPANS[helper](seq, min(len(ok), len(seq))))
    for (_, offsets), seq, old in zip(
        plan.indexed, lists[:indexed], previous.lists[:indexed], strict=True
    ):
        same = reads if seq is items and old is previous.items else _same_at(seq, old, owned)
        for attr, offset in offsets:
            if not attr:  # the same element in every iteration
                if not (0 <= offset < len(same) and same[offset]):
                    return []
                continue
            # iteration t reads seq[t + shift]: it must exist (no wrap-around) and be the same
            shift = offset + (attr == "index")
            lo = min(max(-shift, 0), len(ok))
            hi = max(min(len(ok), len(same) - shift), lo)
            ok = [
                *[False] * lo,
                *map(operator.and_, ok[lo:hi], same[lo + shift : hi + shift]),
                *[False] * (len(ok) - hi),
            ]
    for threshold, limit, old_limit in zip(
        plan.thresholds, limits, previous.thresholds, strict=True
    ):
        for t in _flips(threshold, limit, old_limit, 0, len(ok)):
            ok[t] = False
    blocks: list[tuple[int, int]] = []
    t = 0
    while True:
        try:
            lo = ok.index(True, t)
        except ValueError:
            return blocks
        try:
            hi = ok.index(False, lo)
        except ValueError:
            hi = len(ok)
        blocks.append((lo, hi))
        t = hi


def _within(ok: list[bool], same: list[bool], spans: list[tuple[int, int]]) -> list[bool]:
    """``ok[t]`` kept where ``same`` holds over all of span ``t`` (and there is one)."""
    changed = list(itertools.accumulate(map(operator.not_, same), initial=0))
    top = len(same)
    return [
        good and hi <= top and changed[hi] == changed[lo]
        for good, (lo, hi) in zip(ok, spans, strict=False)
    ] + [False] * (len(ok) - len(spans))


def _flips(threshold: Threshold, new: int, old: int, lo: int, hi: int) -> list[int]:
    """Iterations in ``[lo, hi)`` for which the comparison differs between the two values.
    For integer operands that can only happen between them (give or take one)."""
    if new == old:
        return []
    compare = _OPS[threshold.op]
    shift = threshold.attr == "index"
    out = []
    for t in range(max(lo, min(new, old) - 2), min(hi, max(new, old) + 3)):
        a = t + shift
        if threshold.flipped:
            differs = bool(compare(new, a)) != bool(compare(old, a))
        else:
            differs = bool(compare(a, new)) != bool(compare(a, old))
        if differs:
            out.append(t)
    return out


def _same_at(new: list[Any], old: list[Any], owned: list[Any]) -> list[bool]:
    """Per index of the shorter list: the same object in both, and one of ``owned``."""
    same = list(map(operator.is_, new, old))
    if new is not owned:
        same = list(map(operator.and_, same, map(set(map(id, owned)).__contains__, map(id, new))))
    return same


def _state(written: list[tuple[dict[str, Any], tuple[str, ...]]]) -> _State:
    return tuple({k: v for k, v in live.items() if k in attrs} for live, attrs in written)


def _same_state(new: _State, old: _State) -> bool:
    try:
        return bool(_key(new) == _key(old))
    except Unkeyable:
        return False


def _key(state: _State) -> Any:
    return tuple(tuple((k, fingerprint(v)) for k, v in d.items()) for d in state)


def _attrs(space: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = object.__getattribute__(space, "_Namespace__attrs")
    return attrs


def _render(plan: LoopPlan, items: list[Any], t: int, values: dict[str, Any]) -> str:
    loop = _LoopView(t, items, plan.body.environment.undefined)
    return plan.body.render({**values, plan.target: items[t], "loop": loop})


class _LoopView:
    """The ``loop`` attributes a planned body may read, as jinja's ``LoopContext`` has them
    for a top-level, non-recursive loop."""

    __slots__ = ("first", "index", "index0", "last", "nextitem", "previtem")
    depth = 1
    depth0 = 0

    def __init__(self, t: int, items: list[Any], undefined: type[Undefined]) -> None:
        self.index0 = t
        self.index = t + 1
        self.first = t == 0
        self.last = t == len(items) - 1
        self.previtem = undefined("there is no previous item") if self.first else items[t - 1]
        self.nextitem = undefined("there is no next item") if self.last else items[t + 1]
