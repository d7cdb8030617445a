"""Aho-Corasick automaton over the token pieces: one step per byte gives the longest token that
ends the text, the entry of the search.

States are the trie nodes (prefixes of tokens).  ``entry[s]`` is the longest token that is a
suffix of state ``s`` (itself when ``s`` spells a token, else inherited over the failure link),
so reading a byte never walks suffix links to find it.  The trie edges and failure links are
built first; ``transition_blocks`` then turns them into a complete transition table whose rows
share 16-byte blocks, so that a step is two loads (worst-case O(1)) without the hundreds of MB
of a dense 256-wide table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.tokenization.incremental_bpe.vocabulary import ProperVocabulary

Int32Array = npt.NDArray[np.int32]


@dataclass(frozen=True)
class Automaton:
    """``first[s]:first[s+1]`` index the edges of state ``s`` (``label`` bytes, ``target``)."""

    first: Int32Array
    label: npt.NDArray[np.uint8]
    target: Int32Array
    fail: Int32Array
    entry: Int32Array
    depth: Int32Array
    token_state: Int32Array  # the state that spells each token


def build_automaton(vocabulary: ProperVocabulary) -> Automaton:
    edges: dict[int, int] = {}  # state * 256 + byte -> state
    depth = [0]
    token_state = []
    for piece in vocabulary.pieces:
        state = 0
        for byte in piece:
            key = state * 256 + byte
            nxt = edges.get(key)
            if nxt is None:
                nxt = edges[key] = len(depth)
                depth.append(depth[state] + 1)
            state = nxt
        token_state.append(state)
    states = len(depth)
    keys = np.fromiter(edges.keys(), dtype=np.int64, count=len(edges))
    targets = np.fromiter(edges.values(), dtype=np.int32, count=len(edges))
    order = np.argsort(keys, kind="stable")
    keys, targets = keys[order], targets[order]
    first = np.searchsorted(keys, np.arange(states + 1, dtype=np.int64) * 256).astype(np.int32)

    fail = np.zeros(states, dtype=np.int32)
    entry = np.full(states, -1, dtype=np.int32)
    for token, state in enumerate(token_state):
        entry[state] = token
    # breadth first: a state's failure link and entry come from shallower states
    by_depth = np.argsort(np.asarray(depth, dtype=np.int32), kind="stable")
    parent = np.zeros(states, dtype=np.int32)
    parent[targets] = (keys // 256).astype(np.int32)
    label = (keys % 256).astype(np.uint8)
    byte_of = np.zeros(states, dtype=np.int32)
    byte_of[targets] = label
    fail_list = fail.tolist()
    entry_list = entry.tolist()
    parent_list = parent.tolist()
    byte_list = byte_of.tolist()
    for state in by_depth.tolist()[1:]:
        up = parent_list[state]
        if up:
            key_byte = byte_list[state]
            link = fail_list[up]
            while True:
                nxt = edges.get(link * 256 + key_byte)
                if nxt is not None or link == 0:
                    break
                link = fail_list[link]
            fail_list[state] = nxt if nxt is not None else 0
        if entry_list[state] < 0:
            entry_list[state] = entry_list[fail_list[state]]
    return Automaton(
        first=first,
        label=label,
        target=targets,
        fail=np.asarray(fail_list, dtype=np.int32),
        entry=np.asarray(entry_list, dtype=np.int32),
        depth=np.asarray(depth, dtype=np.int32),
        token_state=np.asarray(token_state, dtype=np.int32),
    )


def transition_blocks(automaton: Automaton) -> tuple[Int32Array, Int32Array]:
    """The full transition table in 16-byte blocks, shared between states: worst-case O(1).

    ``next(s, c) = blocks[block_of[s, c >> 4], c & 15]``.  A state's row is its failure
    state's row with its own edges written over it, so a state owns new blocks only for the
    byte groups its edges fall in and shares the rest (built level by level: a failure state is
    always shallower).  Size: 64 bytes per state plus 64 per owned block, instead of 1 KiB.
    """
    states = len(automaton.depth)
    parent = np.repeat(np.arange(states, dtype=np.int64), np.diff(automaton.first))
    label = automaton.label.astype(np.int64)
    target = automaton.target.astype(np.int64)
    block_of = np.zeros((states, 16), dtype=np.int64)
    blocks = np.zeros((16 + len(label), 16), dtype=np.int32)
    root = slice(automaton.first[0], automaton.first[1])  # the root has all 256 edges
    blocks[:16].reshape(-1)[label[root]] = target[root]
    block_of[0] = np.arange(16)
    count = 16
    edge_depth = automaton.depth[parent]
    order = np.argsort(automaton.depth, kind="stable")
    level_starts = np.searchsorted(automaton.depth[order], np.arange(automaton.depth.max() + 2))
    for depth in range(1, len(level_starts) - 1):
        level = order[level_starts[depth] : level_starts[depth + 1]]
        block_of[level] = block_of[automaton.fail[level]]
        mine = np.flatnonzero(edge_depth == depth)
        if not len(mine):
            continue
        owner = parent[mine] * 16 + (label[mine] >> 4)
        owned, which = np.unique(owner, return_inverse=True)
        fresh = np.arange(count, count + len(owned))
        blocks[fresh] = blocks[block_of.reshape(-1)[owned]]
        blocks[fresh[which], label[mine] & 15] = target[mine]
        block_of.reshape(-1)[owned] = fresh
        count += len(owned)
    return block_of.astype(np.int32), blocks[:count]
