"""The successor forest and the intervals that turn the last-token condition into one compare.

A token's successor is its right part.  Read as a forest (parent = successor, roots = byte
atoms), the path from an atom down to a token is how the last token of a text grows leftwards
while BPE runs.  Children are ordered by merge priority, lowest first, so a preorder numbering
puts the subtrees of high-priority children last.  Then the tokens ``k`` for which merging
``pre(t)`` into ``t`` is still possible when ``k`` ends the text before ``suc(t)`` (``k`` grew
through ``pre(t)``, and its next step after ``pre(t)`` merges later than ``t``) are exactly those
whose preorder number lies in ``[low[t], high[t])``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.tokenization.incremental_bpe.vocabulary import ATOMS, ProperVocabulary

Int32Array = npt.NDArray[np.int32]


@dataclass(frozen=True)
class Intervals:
    """``order[k]``: preorder number of token k; ``low``/``high``: the interval of each token."""

    order: Int32Array
    low: Int32Array
    high: Int32Array


def successor_children(vocabulary: ProperVocabulary) -> list[list[int]]:
    """Children of each token (tokens whose right part it is), lowest merge priority first."""
    children: list[list[int]] = [[] for _ in vocabulary.pieces]
    for t in range(len(vocabulary.pieces) - 1, ATOMS - 1, -1):  # numbers are priorities
        children[vocabulary.suc[t]].append(t)
    return children


def intervals(vocabulary: ProperVocabulary, children: list[list[int]]) -> Intervals:
    size = len(vocabulary.pieces)
    order = np.zeros(size, dtype=np.int32)
    end = np.zeros(size, dtype=np.int32)  # one past the subtree's last preorder number
    clock = 0
    for root in range(ATOMS):
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                end[node] = clock
                continue
            order[node] = clock
            clock += 1
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(children[node]))
    low = np.full(size, -1, dtype=np.int32)
    high = np.full(size, -1, dtype=np.int32)
    for t in range(ATOMS, size):
        left = vocabulary.pre[t]
        siblings = children[left]  # descending numbers; the first one merging before t ends it
        cut = _first_not_above(siblings, t)
        low[t] = order[left]
        high[t] = order[siblings[cut]] if cut < len(siblings) else end[left]
    return Intervals(order=order, low=low, high=high)


def _first_not_above(descending: list[int], value: int) -> int:
    lo, hi = 0, len(descending)
    while lo < hi:
        mid = (lo + hi) // 2
        if descending[mid] > value:
            lo = mid + 1
        else:
            hi = mid
    return lo
