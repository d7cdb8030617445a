"""Per-session render memo: what one call leaves for the next call of the same conversation.

Agents resend their whole transcript on every call, so almost everything a render computes
was computed by the session's previous call. A session keeps

* the previous call's request messages (shallow copies, so that a caller editing its dicts
  in place cannot edit them) and their prepared (vLLM-processed) dicts: a message equal to
  the one at the same position last call reuses its prepared dict, object and all, which is
  what lets ``app.rendering.replay`` recognise unchanged items by identity;
* each planned loop's last run (``replay.LoopRun``).

"Equal" must be type- and order-exact: ``{"a": 1}`` and ``{"a": True}`` are ``==`` but
render differently, and so may dicts with their keys in another order. So a message is
reused when it is ``==`` to last call's (exact for its string and ``None`` values; its own
key order does not matter, ``prepare_message`` reads it key by key) and its other values
(tool calls, content parts, numbers) have the same ``marshal`` bytes (version 2: no
back-references), which pin types, key order and float bits.
"""

from __future__ import annotations

import bisect
import itertools
import marshal
import operator
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.memos import Memos
from app.rendering.loops import LoopPlan
from app.rendering.replay import LoopRun, run_loop

# glibc's ceiling for its dynamic mmap threshold (64-bit), less a page of chunk overhead
_MMAP_CEILING = (32 << 20) - (64 << 10)
_FEW_EDITS = 64  # changed messages up to which the check list is patched rather than rebuilt


@dataclass
class SessionMemo:
    """One session's memo; ``size`` estimates the bytes it holds."""

    fmt: str = ""
    requests: list[Any] = field(default_factory=list)
    originals: list[Any] = field(default_factory=list)  # last call's objects, when trusted
    # per request message: its keys holding values other than strings and None, with the
    # marshal bytes of those values; None when the message is not plain data (not reused)
    exact: list[tuple[tuple[str, ...], bytes] | None] = field(default_factory=list)
    prepared: list[dict[str, Any]] = field(default_factory=list)
    checks: list[int] = field(default_factory=list)  # positions needing more than ==
    runs: dict[int, LoopRun] = field(default_factory=dict)
    reused: int = 0  # prepared messages reused by the last call (for tests and benchmarks)
    size: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        self.requests, self.exact, self.prepared, self.checks = [], [], [], []
        self.originals = []
        self.runs.clear()
        self.size = 0

    def prepare(
        self,
        messages: Sequence[Any],
        fmt: str,
        prepare_one: Callable[[int, Any], dict[str, Any]],
        *,
        frozen: bool = False,
    ) -> list[dict[str, Any]]:
        """Prepared messages, reusing last call's dicts for messages equal to last call's.

        The comparisons run at C speed (``map``); Python visits only the messages that changed
        and those that need more than ``==``.  ``frozen``: the caller never mutates message
        objects, so one that *is* last call's object needs no check beyond that."""
        if fmt != self.fmt:
            self.clear()
            self.fmt = fmt
        n_new = len(messages)
        if frozen and self._extends(messages):
            # Last call's objects, then new ones (an agent's usual call): one identity pass.
            redo = list(range(len(self.originals), n_new))
        else:
            redo = self._changed(messages, frozen)
        old_exact, old_prepared = self.exact, self.prepared
        out, exact = old_prepared[:n_new], old_exact[:n_new]
        requests = self.requests[:n_new]
        for i in redo:
            message = messages[i]
            fresh = (
                prepare_one(i, message),
                # a copy: a caller editing its dict in place must not edit what we compare to
                dict(message) if type(message) is dict else message,
                _exactness(message),
            )
            if i < len(out):
                out[i], requests[i], exact[i] = fresh
            else:
                out.append(fresh[0])
                requests.append(fresh[1])
                exact.append(fresh[2])
        checks = _checks_after(self.checks[: bisect.bisect_left(self.checks, n_new)], redo, exact)
        reused = n_new - len(redo)
        self.requests, self.exact, self.prepared, self.checks = requests, exact, out, checks
        self.originals = list(messages) if frozen else []
        self.reused = reused
        return out

    def _extends(self, messages: Sequence[Any]) -> bool:
        """``messages`` begins with last call's message objects, all of them."""
        n = len(self.originals)
        return 0 < n <= len(messages) and all(map(operator.is_, messages, self.originals))

    def _changed(self, messages: Sequence[Any], frozen: bool) -> list[int]:
        """The positions whose prepared message cannot be last call's."""
        old_exact, originals = self.exact, self.originals
        # Frozen inputs: the objects that are last call's need no comparison at all.
        if frozen:
            same = list(map(operator.is_, messages, originals))
            same += [False] * (min(len(messages), len(self.requests)) - len(same))
            identical = same.copy()
            for i in itertools.compress(range(len(same)), map(operator.not_, same)):
                same[i] = messages[i] == self.requests[i]
        else:
            same = list(map(operator.eq, messages, self.requests))
            identical = [False] * len(same)
        dumps, n = marshal.dumps, len(same)
        checks = self.checks[: bisect.bisect_left(self.checks, n)]
        # The messages with tool calls that are not last call's objects need more than ==.
        for i in itertools.compress(checks, map(operator.not_, map(identical.__getitem__, checks))):
            if same[i]:
                known = old_exact[i]
                if known is None:
                    same[i] = False
                    continue
                keys, data = known
                message = messages[i]
                try:
                    value = message[keys[0]] if len(keys) == 1 else [message[k] for k in keys]
                    same[i] = dumps(value, 2) == data
                except ValueError:
                    same[i] = False
        # Reuse what is the same and a plain dict; prepare the rest (visited by index only,
        # so an edit near the start costs what the edited messages cost).
        n_new = len(messages)
        is_dict = map(operator.is_, map(type, messages), itertools.repeat(dict))
        reuse = list(map(operator.and_, same[:n_new], is_dict))
        redo = [*itertools.compress(range(len(reuse)), map(operator.not_, reuse))]
        redo += range(len(reuse), n_new)
        return redo

    def render_loop(self, k: int, plan: LoopPlan, items: Any, values: dict[str, Any]) -> list[str]:
        """Loop ``k``'s output pieces, replaying what it can of its previous run."""
        pieces, run = run_loop(plan, items, values, self.runs.pop(k, None), self.prepared)
        if run is not None:
            self.runs[k] = run
        return pieces

    def resize(self) -> None:
        """Estimate: each run's text, and as much again for the messages (the messages'
        text when no loop is memoized), in the bytes their strings hold."""
        text = sum(r.nbytes for r in self.runs.values())
        self.size = 2 * text if text else sum(map(_text_bytes, self.requests))


def _checks_after(
    kept: list[int], redo: list[int], exact: list[tuple[tuple[str, ...], bytes] | None]
) -> list[int]:
    """The sorted positions needing more than ``==`` once the ``redo`` positions (sorted) were
    prepared again: a few edits cost what they touch, not a pass over every message."""
    if len(redo) > _FEW_EDITS:
        redone = set(redo)
        return sorted(
            {i for i in kept if i not in redone}
            | {i for i in redo if (known := exact[i]) is None or known[0]}
        )
    for i in redo:
        at = bisect.bisect_left(kept, i)
        stays = (known := exact[i]) is None or bool(known[0])
        present = at < len(kept) and kept[at] == i
        if present and not stays:
            del kept[at]
        elif stays and not present:
            kept.insert(at, i)
    return kept


def _text_bytes(message: Any) -> int:
    if type(message) is not dict:
        return 0
    return sum(sys.getsizeof(v) for v in message.values() if type(v) is str)


def _exactness(message: Any) -> tuple[tuple[str, ...], bytes] | None:
    """What, beyond ``==``, a later message must match to count as this one."""
    if type(message) is not dict:
        return None
    keys = tuple(k for k, v in message.items() if type(v) is not str and v is not None)
    data = _nested(message, keys) if keys else b"-"
    return (keys, data) if data else None


def _nested(message: dict[str, Any], keys: tuple[str, ...]) -> bytes:
    return _marshal(message[keys[0]] if len(keys) == 1 else [message[key] for key in keys])


def _marshal(value: Any) -> bytes:
    """``value``'s marshal bytes; empty when it is not plain JSON-like data."""
    try:
        return marshal.dumps(value, 2)
    except ValueError:
        return b""


RenderMemos = dict[str, SessionMemo]
"""A session's render memos, by template and variant."""


class RenderCache:
    """The render memos of every session, kept in ``memos`` (``app.memos``: whatever keeps
    them bounds them; a memo's size counts the bytes its text holds)."""

    def __init__(self, memos: Memos[RenderMemos]) -> None:
        self._memos = memos
        self._headroom = 0  # the largest block ``make_room`` has freed

    def make_room(self, text: str) -> None:
        """Keep the next, slightly longer result off fresh pages.

        A session's prompt grows every call, so each result is a little larger than any
        block freed before: glibc serves it with a new ``mmap`` (its dynamic threshold only
        rises to the size of a freed mapped block), and faulting in ~1,000 zeroed pages costs
        ~2 ms for a 4 MB (1M-char UCS-4) prompt, twenty times the copy itself.  Freeing one
        untouched (``calloc``) block several times that size raises the threshold past it,
        so results come from (and return to) the heap.  Once per size doubling; the output
        is unaffected, and elsewhere it is a harmless allocate-and-free."""
        size = sys.getsizeof(text)
        if 2 * size <= self._headroom or self._headroom >= _MMAP_CEILING:
            return
        self._headroom = min(4 * size, _MMAP_CEILING)
        block = bytes(self._headroom)
        del block

    def session(self, key: str, variant: str) -> SessionMemo:
        """Session ``key``'s memo for a template variant (a new one when there is none)."""
        memos = self._memos.get(key) or {}
        memo = memos.get(variant)
        if memo is None:
            memo = SessionMemo()
            memos = {**memos, variant: memo}  # never changed once stored: copied
            self._memos.put(key, memos, _size(memos))
        return memo

    def account(self, key: str, memo: SessionMemo) -> None:
        """After a render: the session's memos are kept at their new size."""
        memo.resize()
        memos = self._memos.get(key)
        if memos is not None and any(m is memo for m in memos.values()):
            self._memos.put(key, memos, _size(memos))


def _size(memos: RenderMemos) -> int:
    return sum(m.size for m in memos.values())
