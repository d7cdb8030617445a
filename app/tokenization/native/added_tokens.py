"""The added-token search in C: the leftmost-longest matches of ``gpu_kernels.added_spans``
with each match's id, in one call that releases the GIL.

The tokens go to C as a byte trie in four arrays (``_trie``): a node's edges, sorted by byte,
are one stretch of the edge arrays, and each node holds the id of the token ending there.  At
every byte a token can begin with (memchr finds them when there are few such bytes, as there
are: ``<`` for most vocabularies), the trie is walked as far as the text follows it, and the
longest token on that walk is taken; the search resumes after it, as the reference's split
does.
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
    """(edge_start, edge_byte, edge_child, token) of the tokens' trie; node 0 is the root."""
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
    edges = [sorted(c.items()) for c in children]
    starts = np.cumsum([0, *map(len, edges)], dtype=np.int32)
    flat = [edge for node in edges for edge in node]
    return (
        starts,
        np.fromiter((b for b, _ in flat), dtype=np.uint8, count=len(flat)),
        np.fromiter((c for _, c in flat), dtype=np.int32, count=len(flat)),
        np.asarray(token, dtype=np.int32),
    )
