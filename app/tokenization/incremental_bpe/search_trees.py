"""Centroid search trees: the deepest valid token found in O(log t) probes of O(log t) each.

The suffix tokens of a token ``tau`` form a tree (parent = successor, root = the last byte).
When ``tau`` is the longest token ending the text, the last token of the text lies in that tree,
and the tokens passing the interval test form a path from the root: the last token is the
deepest one.  A centroid decomposition of each tree gives a search of logarithmic depth: at a
centroid that fails the test the answer is towards the root; at one that passes, at most one
child passes (children's intervals are disjoint, found by binary search), and the answer is in
that child's part or is the centroid itself.

Flat layout, one record per (tree, centroid): ``token``, ``up`` (the search tree node of the
part towards the root, -1 if none) and the children ``first[n]:first[n+1]`` as
``(low, high, node)`` sorted by ``low`` (``node`` -1 when the child is outside the part).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.tokenization.incremental_bpe.automaton import Automaton
from app.tokenization.incremental_bpe.forest import Intervals
from app.tokenization.incremental_bpe.vocabulary import ProperVocabulary

Int32Array = npt.NDArray[np.int32]


@dataclass(frozen=True)
class SearchTrees:
    root: Int32Array  # per token: its tree's first search node
    token: Int32Array
    up: Int32Array
    first: Int32Array
    child_low: Int32Array
    child_high: Int32Array
    child_node: Int32Array


# A decomposition depends only on the tree's shape (the local parent array), and real
# vocabularies have few shapes: plans are computed once per shape.  A plan lists, per search
# node in creation order: the local centroid, its ``up`` (relative index, -1 none) and its tree
# children as (local child, relative index of the child's part, -1 when outside the part).
_Plan = list[tuple[int, int, list[tuple[int, int]]]]


def _plan(parent: tuple[int, ...]) -> _Plan:
    size = len(parent)
    kids: list[list[int]] = [[] for _ in range(size)]
    for v in range(size):
        if parent[v] >= 0:
            kids[parent[v]].append(v)
    removed = [False] * size
    centroids: list[int] = []
    up: list[int] = []
    home = [-1] * size  # the search node of the part a child was left in
    pending = [(parent.index(-1), -1, -1)]  # a node of the part, origin, child of origin
    while pending:
        start, origin, via = pending.pop()
        centroid = _centroid(start, parent, kids, removed)
        index = len(centroids)
        if origin >= 0 and via < 0:
            up[origin] = index
        elif origin >= 0:
            home[via] = index
        centroids.append(centroid)
        up.append(-1)
        removed[centroid] = True
        if parent[centroid] >= 0 and not removed[parent[centroid]]:
            pending.append((parent[centroid], index, -1))
        pending.extend((kid, index, kid) for kid in kids[centroid] if not removed[kid])
    return [
        (c, up[i], [(kid, home[kid] if home[kid] > i else -1) for kid in kids[c]])
        for i, c in enumerate(centroids)
    ]


class _Builder:
    def __init__(self, intervals: Intervals) -> None:
        self.low = intervals.low.tolist()
        self.high = intervals.high.tolist()
        self.token: list[int] = []
        self.up: list[int] = []
        self.children: list[list[tuple[int, int, int]]] = []
        self.plans: dict[tuple[int, ...], _Plan] = {}

    def add_tree(self, nodes: list[int], parent: tuple[int, ...]) -> int:
        """Append the search tree of one tree (local ``parent``, -1 at the root); its root."""
        plan = self.plans.get(parent)
        if plan is None:
            plan = self.plans[parent] = _plan(parent)
        base = len(self.token)
        low, high = self.low, self.high
        for centroid, up, kids in plan:
            self.token.append(nodes[centroid])
            self.up.append(base + up if up >= 0 else -1)
            entries = [
                (low[nodes[kid]], high[nodes[kid]], base + part if part >= 0 else -1)
                for kid, part in kids
            ]
            entries.sort()
            self.children.append(entries)
        return base

    def finish(self, roots: list[int]) -> SearchTrees:
        flat = [entry for entries in self.children for entry in entries]
        first = np.zeros(len(self.children) + 1, dtype=np.int32)
        first[1:] = np.cumsum([len(entries) for entries in self.children])
        table = np.asarray(flat, dtype=np.int32).reshape(-1, 3)
        return SearchTrees(
            root=np.asarray(roots, dtype=np.int32),
            token=np.asarray(self.token, dtype=np.int32),
            up=np.asarray(self.up, dtype=np.int32),
            first=first,
            child_low=np.ascontiguousarray(table[:, 0]),
            child_high=np.ascontiguousarray(table[:, 1]),
            child_node=np.ascontiguousarray(table[:, 2]),
        )


def _centroid(
    start: int, parent: tuple[int, ...], kids: list[list[int]], removed: list[bool]
) -> int:
    top = start
    while parent[top] >= 0 and not removed[parent[top]]:
        top = parent[top]
    order = [top]
    for v in order:
        order.extend(k for k in kids[v] if not removed[k])
    weight = {v: 1 for v in order}
    for v in reversed(order[1:]):
        weight[parent[v]] += weight[v]
    half = len(order) // 2
    node = top
    while True:
        heavy = next((k for k in kids[node] if not removed[k] and weight[k] > half), -1)
        if heavy < 0:
            return node
        node = heavy


def build_search_trees(
    vocabulary: ProperVocabulary, automaton: Automaton, intervals: Intervals
) -> SearchTrees:
    fail = automaton.fail.tolist()
    entry = automaton.entry.tolist()
    token_state = automaton.token_state.tolist()
    suc = vocabulary.suc
    builder = _Builder(intervals)
    roots = []
    for tau in range(len(vocabulary.pieces)):
        suffixes = [tau]  # the tokens ending tau, longest first
        while (shorter := entry[fail[token_state[suffixes[-1]]]]) >= 0:
            suffixes.append(shorter)
        local = {t: i for i, t in enumerate(suffixes)}
        parent = tuple(local[suc[t]] if suc[t] >= 0 else -1 for t in suffixes)
        roots.append(builder.add_tree(suffixes, parent))
    return builder.finish(roots)
