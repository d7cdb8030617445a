"""The added-token search in C: the leftmost-longest matches of ``gpu_kernels.added_spans``
with each match's id, in one call that releases the GIL.

The tokens go to C as a radix trie in six arrays (``_trie``): a node's edges, sorted by byte,
are one stretch of the edge arrays; each node holds the id of the token ending there and its
label, the bytes after its edge's byte up to the next node, where a token ends or the tokens
part (a chain of nodes with one edge each and no token between is one node: Llama-3's
``<|start_header_id|>`` is three steps, not nineteen, and its transcripts' search took an
eighth of their encode).  At every byte a token can begin with (found 64 bytes at a time),
the trie is walked as far as the text follows it, and the longest token on that walk is
taken; the search resumes after it, as the reference's split does.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from app.tokenization.native._native import AddedTokens
from gpu_kernels.payload import Found, Offsets


class NativeAddedSpans:
    """A ``gpu_kernels.payload.Finder``: called with a text's UTF-8, the begin and end (bytes)
    and id of each added token in it."""

    def __init__(self, tokens: Mapping[bytes, int]) -> None:
        self._core = AddedTokens(*_trie(tokens))

    def __call__(self, data: bytes) -> Found:
        begin, end, ids = self._core.find(data)
        spans: Offsets = np.frombuffer(begin, dtype=np.int64)
        return spans, np.frombuffer(end, dtype=np.int64), np.frombuffer(ids, dtype=np.int32)


def _trie(tokens: Mapping[bytes, int]) -> tuple[np.ndarray, ...]:
    """(edge_start, edge_byte, edge_child, token, label_at, labels) of the tokens' radix trie:
    node k's label is labels[label_at[k]:label_at[k + 1]]; node 0 is the root."""
    children: list[dict[int, int]] = [{}]
    token = [-1]
    for text, id_ in tokens.items():
        node = 0
        for byte in text:
            if byte not in children[node]:
                children[node][byte] = len(children)
                children.append({})
                token.append(-1)
            node = children[node][byte]
        if text:  # HF adds no empty token
            token[node] = id_
    kept, labels = [0], [b""]  # by the radix trie's node: the byte trie's, its label
    edges: list[list[tuple[int, int]]] = []
    for node in kept:  # grows as it goes: each node's children are kept after it
        edges.append([])
        for byte, child in sorted(children[node].items()):
            label = bytearray()
            while token[child] < 0 and len(children[child]) == 1:  # no leaf lacks a token
                ((next_byte, child),) = children[child].items()
                label.append(next_byte)
            edges[-1].append((byte, len(kept)))
            kept.append(child)
            labels.append(bytes(label))
    starts = np.cumsum([0, *map(len, edges)], dtype=np.int32)
    flat = [edge for node in edges for edge in node]
    return (
        starts,
        np.fromiter((b for b, _ in flat), dtype=np.uint8, count=len(flat)),
        np.fromiter((c for _, c in flat), dtype=np.int32, count=len(flat)),
        np.asarray([token[node] for node in kept], dtype=np.int32),
        np.cumsum([0, *map(len, labels)], dtype=np.int32),
        np.frombuffer(b"".join(labels), dtype=np.uint8),
    )
