"""Stable cut positions, per pre-tokenizer family.

A cut ``c`` of a text T is *stable* when ``tok(T) == tok(T[:c]) + tok(T[c:])``: the left side
encoded as a whole text of its own, the right side likewise.  Every rule here decides stability
from the two or three bytes around ``c`` plus the added tokens within reach, so it gives the same
answer for any two texts that agree on that neighbourhood (the stored and the new transcript).

Why each rule holds (docs/design.md#pre-tokenizer-rules-per-family has the regexes):

``alnum|space`` (T[c-1] an ASCII letter or digit, T[c] a space), every GPT-style family.  The
piece holding T[c-1] is a letter, digit or contraction piece; none of those alternatives can
take a space, so it ends at c whatever follows, and it is the same piece at end of text.  No
pattern has a look-behind, so matching from c sees exactly what matching T[c:] alone sees.
Both bytes are ASCII: NFC/NFKC neither compose across them nor change them.

``newline|ascii`` (T[c-1] == "\\n", T[c] printable ASCII other than space), cl100k, Qwen2,
Qwen3.5, Kimi, DeepSeek-V3.  A piece holding "\\n" can only continue over more ``[\\r\\n]``
or whitespace (``\\s*[\\r\\n]+``, punctuation's ``[\\r\\n]*``), and whitespace-before-newline
is matched by ``\\s*[\\r\\n]+`` before ``\\s+(?!\\S)`` is tried, so it ends at c both mid-text
and at end of text.  Letter prefixes ``[^\\r\\n...]?`` exclude "\\n", so nothing right of c
reaches back.  o200k and Tekken: the same, except that punctuation absorbs ``[\\r\\n/]*``, so
T[c] must not be "/".  GPT-2 (no ``\\s*[\\r\\n]+``): ``\\s+(?!\\S)`` keeps a whitespace run
whole at end of text but hands its last char on mid-text, so the run before c must be the
single "\\n" (T[c-2] printable).

``printable-but->|space`` (T[c-1] printable ASCII other than ">", T[c] a space), Gemma's
``spaces_replaced``: no pre-split, each stretch between added tokens is one BPE word after
spaces become "▁".  A merge makes a vocabulary token, and ``tokenizer_spec`` checked that no
token holds "▁" right after such a character (and that both are tokens: no byte fallback or
unknown token), so no merge crosses c; the merges on each side are then those of that side
alone.  No "▁" is prepended and no BOS added, so T[c:] starts like the middle of a text.

Added tokens are split out first, leftmost-longest.  If no occurrence of any added token crosses
c, the split of T is the split of T[:c] followed by that of T[c:], so c stays stable.  Tokens
that strip or need word boundaries look at neighbouring whitespace of any length: near those,
a cut is refused unless the whitespace around c is short and no such token is close.

``added-token edge`` (every family): c is the end of an occurrence [s, c) or the start of an
occurrence [c, e), and no occurrence crosses either of its ends.  The split then decomposes at
both ends, and at s the longest match is [s, c) itself (a longer one would cross c), so the
token is split out and c is a hard boundary: normalizer and pre-tokenizer never see across it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from app.tokenizer_spec import AddedToken, TokenizerSpec

_ALNUM_SPACE = rb"(?<=[A-Za-z0-9])(?= )"
_NEWLINE_ASCII = rb"(?<=\n)(?=[!-~])"
_NEWLINE_ASCII_NO_SLASH = rb"(?<=\n)(?=[!-.0-~])"
_NEWLINE_AFTER_PRINTABLE = rb"(?<=[!-~]\n)(?=[!-~])"
_SPACE_AFTER_PRINTABLE = rb"(?<=[!-=?-~])(?= )"  # tokenizer_spec.SPACE_CUT_AFTER

_NEWLINE_SPLIT = {"alnum|space": _ALNUM_SPACE, "newline|ascii": _NEWLINE_ASCII}
_GPT2 = {"alnum|space": _ALNUM_SPACE, "printable,newline|ascii": _NEWLINE_AFTER_PRINTABLE}

RULES: dict[str, dict[str, bytes]] = {
    "cl100k": _NEWLINE_SPLIT,
    "qwen2": _NEWLINE_SPLIT,
    "deepseek_v3": _NEWLINE_SPLIT,
    "o200k": {"alnum|space": _ALNUM_SPACE, "newline|ascii-but-slash": _NEWLINE_ASCII_NO_SLASH},
    "tekken": {"alnum|space": _ALNUM_SPACE, "newline|ascii-but-slash": _NEWLINE_ASCII_NO_SLASH},
    "qwen35": _NEWLINE_SPLIT,
    "kimi": _NEWLINE_SPLIT,
    "spaces_replaced": {"printable-but->|space": _SPACE_AFTER_PRINTABLE},
    "gpt2": _GPT2,
    "gpt2_digits": _GPT2,
}

# How far whitespace next to a cut may reach before stripping tokens make us refuse the cut.
_STRIP_REACH = 128
_WS_OR_WIDE = re.compile(rb"[\t\n\x0b\x0c\r \x80-\xff]*")
_FIRST_BLOCK = 64
"""Bytes a cut search scans first; each next block is twice as wide."""


def trie_pattern(words: Iterable[bytes]) -> bytes:
    """A regex alternation of ``words`` factored as a trie; it prefers the longest match."""
    root: dict[int, dict[int, object]] = {}
    end = -1
    for word in words:
        node: dict[int, object] = root  # type: ignore[assignment]
        for byte in word:
            node = node.setdefault(byte, {})  # type: ignore[assignment]
        node[end] = {}

    def emit(node: dict[int, object]) -> bytes:
        branches = [
            re.escape(bytes([byte])) + emit(child)  # type: ignore[arg-type]
            for byte, child in sorted(node.items())
            if byte != end
        ]
        if not branches:
            return b""
        body = branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
        if end in node:
            return b"(?:" + body + b")?"
        return body

    return emit(root)  # type: ignore[arg-type]


class AddedTokenGuard:
    """Refuses cuts that an added-token match could cross."""

    def __init__(self, tokens: Iterable[AddedToken], *, normalizer: str | None) -> None:
        toks = [t for t in tokens if t.content]
        encoded = [t.content.encode("utf-8") for t in toks]
        self.longest = max((len(b) for b in encoded), default=0)
        # Occurrences start only at a token's first byte: those are found by a C-level scan,
        # and the longest token is matched at each (``occurrences``).
        first_bytes = sorted({b[0] for b in encoded})
        starts = b"[" + b"".join(re.escape(bytes([x])) for x in first_bytes) + b"]"
        self._finder = (re.compile(starts), re.compile(trie_pattern(encoded))) if encoded else None
        # Proper prefixes of tokens: a position that no token can be "in the middle of" given
        # only the bytes before it cannot be crossed, whatever follows.
        self._prefixes = {b[:k] for b in encoded for k in range(1, len(b))}
        self._leads = [bytes([x]) for x in first_bytes]
        stripping = [b for t, b in zip(toks, encoded, strict=True) if t.strips]
        self._strip_finder = re.compile(trie_pattern(stripping)) if stripping else None
        # Normalized tokens are matched on normalized text: only ASCII is sure to be unchanged.
        self._ascii_only = normalizer is not None and any(t.normalized for t in toks)
        # How far from a position its verdict reads, each way (the ASCII check reads a whole
        # token's length: a character just past a token's last byte may normalize with it).
        near = self.longest if self._ascii_only else max(self.longest - 1, 0)
        self.reach = near + (_STRIP_REACH if stripping else 0)

    def touching(self, text: bytes, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """The ``occurrences`` [start, end) with an end in [lo, hi]: an edge candidate each
        (one starting after hi has neither end there)."""
        lo_start, hi_match = max(0, lo - self.longest), hi + self.longest
        for start, end in self.occurrences(text, lo_start, hi_match, starts_to=hi + 1):
            if lo <= start <= hi or lo <= end <= hi:
                yield start, end

    def occurrences(
        self, text: bytes, lo: int, hi: int, *, starts_to: int | None = None
    ) -> Iterator[tuple[int, int]]:
        """(start, end) of the longest added token starting at each position in [lo, hi)
        (or [lo, starts_to)), matched within ``text[:hi]``, in order."""
        if self._finder is None:
            return
        starts, token = self._finder
        match_at = token.match
        for first in starts.finditer(text, lo, hi if starts_to is None else starts_to):
            start = first.start()
            match = match_at(text, start, hi)
            if match is not None:
                yield start, match.end()

    def allows(self, text: bytes, c: int, last: int) -> bool:
        """Whether no added-token match can cross ``c``, decided from the bytes before
        ``last`` alone (and ``reach`` bytes left of c); False when they cannot decide it."""
        if self._finder is None:
            return c <= last
        if self._ascii_only and (
            c + self.longest > last
            or not text[max(0, c - self.longest) : c + self.longest].isascii()
        ):
            return False
        if self._strip_finder is not None:
            # Stripping tokens: read the whole reach both ways, refuse anything close.
            return (
                c + self.reach <= last
                and self._strip_allows(text, c)
                and not self._crossed(text, c)
            )
        # Nothing before c can start a token reaching past it; else the bytes up to a whole
        # token's length after c decide (refused unread when they are not all in reach).
        if not self._could_be_inside(text, c):
            return c <= last
        return c + self.longest - 1 <= last and not self._crossed(text, c)

    def _crossed(self, text: bytes, c: int) -> bool:
        """Whether an occurrence crosses ``c``: one can start only where a suffix of text[:c]
        is a proper prefix of a token, and only the longest token there reaches furthest."""
        assert self._finder is not None
        match_at, limit = self._finder[1].match, c + self.longest - 1
        return any(
            (found := match_at(text, at, limit)) is not None and found.end() > c
            for at in self._prefix_starts(text, c)
        )

    def _could_be_inside(self, text: bytes, c: int) -> bool:
        """True when some suffix of text[:c] is a proper prefix of an added token."""
        return next(self._prefix_starts(text, c), None) is not None

    def _prefix_starts(self, text: bytes, c: int) -> Iterator[int]:
        """Where the suffixes of text[:c] that are proper prefixes of added tokens start."""
        # Such a suffix starts at a token's first byte: only those are looked at (C-level).
        lo = max(0, c - self.longest + 1)
        for lead in self._leads:
            at = text.rfind(lead, lo, c)
            while at >= 0:
                if text[at:c] in self._prefixes:
                    yield at
                at = text.rfind(lead, lo, at)

    def _strip_allows(self, text: bytes, c: int) -> bool:
        assert self._strip_finder is not None
        lo, hi = max(0, c - self.reach), c + self.reach
        if self._strip_finder.search(text, lo, hi) is not None:
            return False
        right = _WS_OR_WIDE.match(text, c, hi)
        if right is not None and right.end() - c >= _STRIP_REACH:
            return False
        left = c
        while left > lo and (text[left - 1] in b"\t\n\x0b\x0c\r " or text[left - 1] >= 0x80):
            left -= 1
        return c - left < _STRIP_REACH


class CutRules:
    """The proven stable-cut rules of one tokenizer family, searchable in byte windows.

    A verdict on a cut reads a few bytes around it.  Searches take the ``region`` of text known
    to be identical in both transcripts and only return cuts whose verdict reads inside it, so
    the verdict holds for both.
    """

    def __init__(self, spec: TokenizerSpec) -> None:
        if spec.family is None:
            raise ValueError(f"no proven cut rules: {spec.unproven_reason}")
        self.family = spec.family
        self.names = (*RULES[spec.family], "added-token edge")
        self._candidates = re.compile(b"|".join(RULES[spec.family].values()))
        self._guard = AddedTokenGuard(spec.added_tokens, normalizer=spec.normalizer)

    def is_stable(self, text: bytes, c: int) -> bool:
        """The rules' verdict on one position of a whole text (tests use this)."""
        whole = (0, len(text))
        cuts = self.iter_cuts(text, c, c, whole, open_ends=(True, True))
        return 0 < c < len(text) and c in cuts

    def iter_cuts(
        self,
        text: bytes,
        lo: int,
        hi: int,
        region: tuple[int, int],
        *,
        open_ends: tuple[bool, bool] = (False, False),
        descending: bool = False,
    ) -> Iterator[int]:
        """Stable cuts c in [lo, hi] whose verdicts read only ``text[region]``, ascending (or
        ``descending``), each verdict taken only when reached (a repair needs just the one
        nearest the change).

        ``open_ends`` marks a region side that is the start (end) of both texts: reads past it
        find nothing in either, so they need no room there.
        """
        reach = self._guard.reach
        first = -(1 << 62) if open_ends[0] else region[0]
        last = 1 << 62 if open_ends[1] else region[1]
        lo = max(lo, region[0] + 1, first + 2, first + reach)
        hi = min(hi, region[1] - 1, last - 1)
        # Blocks from the side the search starts at, growing: the cut a repair takes is
        # usually a few bytes from the change, so the rest of the window is never scanned.
        # Every verdict reads only its own position's neighbourhood, so the cuts of the
        # blocks, in turn, are exactly the cuts of the whole window in order.
        width = _FIRST_BLOCK
        while lo <= hi:
            if descending:
                block, hi = (max(lo, hi - width + 1), hi), max(lo, hi - width + 1) - 1
            else:
                block, lo = (lo, min(hi, lo + width - 1)), min(hi, lo + width - 1) + 1
            yield from self._block_cuts(text, block, (first, last), descending)
            width *= 2

    def _block_cuts(
        self, text: bytes, block: tuple[int, int], bounds: tuple[int, int], descending: bool
    ) -> Iterator[int]:
        """``iter_cuts`` within ``block`` (inclusive), verdicts reading only ``bounds``."""
        (lo, hi), (first, last) = block, bounds
        guard = self._guard
        edges: dict[int, list[tuple[int, int]]] = {}
        for occurrence in guard.touching(text, lo, hi):
            for c in occurrence:
                if lo <= c <= hi:
                    edges.setdefault(c, []).append(occurrence)
        candidates = {m.start() for m in self._candidates.finditer(text, lo, hi + 1)}
        verdicts: dict[int, bool] = {}  # a position's verdict serves every occurrence edge there

        def allows(c: int) -> bool:
            if c not in verdicts:
                verdicts[c] = guard.allows(text, c, last)
            return verdicts[c]

        def cut_out(occurrence: tuple[int, int]) -> bool:
            """The split surely cuts the occurrence out: no occurrence crosses either end."""
            start, end = occurrence
            return start - guard.reach >= first and allows(start) and allows(end)

        # Verdicts are taken in order, only until the search stops (usually at the first cut).
        for c in sorted(candidates | edges.keys(), reverse=descending):
            if any(map(cut_out, edges.get(c, ()))) or (c in candidates and c < last and allows(c)):
                yield c
