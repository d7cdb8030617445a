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
        # How far from a position its verdict reads, each way.
        self.reach = max(self.longest - 1, 0) + (_STRIP_REACH if stripping else 0)

    def edges(self, text: bytes, lo: int, hi: int) -> list[tuple[int, int, int]]:
        """(cut, start, far) for added-token occurrences [start, end) with an end in [lo, hi]
        that the split surely cuts out (no occurrence crosses either end); the verdict reads
        from ``start - reach`` up to ``far``."""
        found = []
        for start, end in self.occurrences(text, max(0, lo - self.longest), hi + self.longest):
            if not (lo <= start <= hi or lo <= end <= hi):
                continue
            at_start, at_end = self.right_reach(text, start), self.right_reach(text, end)
            if at_start is not None and at_end is not None:
                far = max(start + at_start, end + at_end)
                found += [(c, start, far) for c in (start, end) if lo <= c <= hi]
        return found

    def occurrences(self, text: bytes, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """(start, end) of the longest added token starting at each position in [lo, hi),
        matched within ``text[:hi]``, in order."""
        if self._finder is None:
            return
        starts, token = self._finder
        match_at = token.match
        for first in starts.finditer(text, lo, hi):
            start = first.start()
            match = match_at(text, start, hi)
            if match is not None:
                yield start, match.end()

    def right_reach(self, text: bytes, c: int) -> int | None:
        """None if an added-token match could cross ``c``; else how many bytes right of c that
        verdict read (it always reads ``reach`` bytes to the left)."""
        if self._finder is None:
            return 0
        if self._ascii_only and not text[max(0, c - self.longest) : c + self.longest].isascii():
            return None
        if self._strip_finder is not None:
            # Stripping tokens: read the whole reach both ways, refuse anything close.
            if not self._strip_allows(text, c) or self._crossed(text, c):
                return None
            return self.reach
        if not self._could_be_inside(text, c):
            return 0
        return None if self._crossed(text, c) else self.longest - 1

    def _crossed(self, text: bytes, c: int) -> bool:
        lo = max(0, c - self.longest + 1)
        found = self.occurrences(text, lo, c + self.longest - 1)
        return any(start < c < end for start, end in found)

    def _could_be_inside(self, text: bytes, c: int) -> bool:
        """True when some suffix of text[:c] is a proper prefix of an added token."""
        # Such a suffix starts at a token's first byte: only those are looked at (C-level).
        lo = max(0, c - self.longest + 1)
        for lead in self._leads:
            at = text.rfind(lead, lo, c)
            while at >= 0:
                if text[at:c] in self._prefixes:
                    return True
                at = text.rfind(lead, lo, at)
        return False

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
        reach = self._guard.reach
        # An edge's verdict also reads around the token's far end.
        edges = {
            c
            for c, start, far in self._guard.edges(text, lo, hi)
            if start - reach >= first and far <= last
        }
        candidates = {m.start() for m in self._candidates.finditer(text, lo, hi + 1)}
        for c in sorted(candidates | edges, reverse=descending):
            if c in edges:
                yield c
                continue
            right = self._guard.right_reach(text, c)
            if right is not None and c + max(right, 1) <= last:
                yield c
