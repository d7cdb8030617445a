"""Where added tokens stand in UTF-8 text: leftmost-longest matches, as the reference splits.

One alternation of all tokens, longest first, scans slowly in CPython's regex engine once the
tokens' first bytes (``lead``) differ: it tests a character set at every byte (~0.2 GB/s, not
a byte loop's ~3 GB/s) and tries every token at each lead it meets (DeepSeek-V3: 1,283 tokens,
two leads, 55 ms for 4 MB).  So each lead gets a pattern of its own that opens with a literal:
the start its tokens share, then a lookahead holding their rests as a trie (an attempt costs a
token's length; the longest wins).  No token begins inside that consumed start (``_pattern``),
so each pattern finds every position where one of its tokens begins; the matches of all leads,
merged in text order, are taken from the left, each skipping those it covers.

Agent text holds a lead rarely (``<``: about once per KiB), so the pattern is tried only where
``bytes.find`` (memchr, tens of GB/s) finds its lead: a Python step per hit, cheaper than the
engine's byte loop up to about one hit per ``bytes_per_hit`` bytes; past that the engine scans.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

Spans = list[tuple[int, int]]

_END = -1
"""A trie key: a token ends at this node."""


class AddedSpans:
    """``find(data)``: the byte spans of the added tokens in ``data``, leftmost-longest."""

    def __init__(self, tokens: Collection[bytes], *, bytes_per_hit: int = 1024) -> None:
        """``bytes_per_hit``: the density of a lead past which the regex engine scans for it."""
        self._bytes_per_hit = bytes_per_hit
        leads: dict[bytes, list[bytes]] = {}
        for token in tokens:
            if token:  # HF adds no empty token
                leads.setdefault(token[:1], []).append(token)
        self._patterns = {lead: _pattern(group) for lead, group in leads.items()}
        """Each lead -> a regex matching where a token begins, group 1 ending the longest."""

    def find(self, data: bytes) -> Spans:
        matches = [m for lead in self._patterns for m in self._matches(data, lead)]
        if len(self._patterns) > 1:
            matches.sort()
        spans: Spans = []
        end = 0
        for start, stop in matches:
            if start >= end:
                spans.append((start, stop))
                end = stop
        return spans

    def _matches(self, data: bytes, lead: bytes) -> Spans:
        """Where a token beginning with ``lead`` begins, with the longest's end: the pattern
        tried at each hit of the lead while they stay sparse, else scanning for itself."""
        pattern = self._patterns[lead]
        budget = len(data) // self._bytes_per_hit
        found: Spans = []
        at = data.find(lead)
        while at >= 0:
            budget -= 1
            if budget < 0:
                return [(m.start(), m.end(1)) for m in pattern.finditer(data)]
            if match := pattern.match(data, at):
                found.append((at, match.end(1)))
            at = data.find(lead, at + 1)
        return found


def _pattern(tokens: list[bytes]) -> re.Pattern[bytes]:
    """The longest start the tokens share that overlaps no shift of itself (no token begins
    inside an occurrence, so a match may consume it; CPython checks a literal prefix inline,
    which keeps the scan fast where the lead is dense), then a lookahead of the rests."""
    shared = min(tokens, key=len)
    while not all(t.startswith(shared) for t in tokens) or any(
        shared.endswith(shared[:k]) for k in range(1, len(shared))
    ):
        shared = shared[:-1]
    rests = _trie([t[len(shared) :] for t in tokens])
    return re.compile(re.escape(shared) + b"(?=(" + rests + b"))")


def _trie(tokens: Collection[bytes]) -> bytes:
    """A regex matching the longest of ``tokens`` at a position, its alternatives a trie."""
    root: dict[int, Any] = {}
    for token in tokens:
        node = root
        for byte in token:
            node = node.setdefault(byte, {})
        node[_END] = {}
    return _node(root)


def _node(node: dict[int, Any]) -> bytes:
    """The regex of the rests below ``node``: the bytes of a chain of single children, then an
    alternative per child, and ending here last (so the longest token wins)."""
    chain = b""
    while len(node) == 1 and _END not in node:
        ((byte, node),) = node.items()
        chain += re.escape(bytes([byte]))
    branches = [re.escape(bytes([b])) + _node(child) for b, child in node.items() if b != _END]
    if _END in node:
        branches.append(b"")
    if len(branches) > 1:
        return chain + b"(?:" + b"|".join(branches) + b")"
    return chain + b"".join(branches)
