"""Stable cut positions, per pre-tokenizer family.

A cut ``c`` of a text T is *stable* when ``tok(T) == tok(T[:c]) + tok(T[c:])``: the left side
encoded as a whole text of its own, the right side likewise.  Every rule here decides stability
from the two or three bytes around ``c`` plus the added tokens within reach, so it gives the same
answer for any two texts that agree on that neighbourhood (the stored and the new transcript).

Why each rule holds (PRETOKENIZER-RULES.md has the regexes):

``alnum|space`` (T[c-1] an ASCII letter or digit, T[c] a space), every GPT-style family.  The
piece holding T[c-1] is a letter, digit or contraction piece; none of those alternatives can
take a space, so it ends at c whatever follows, and it is the same piece at end of text.  No
pattern has a look-behind, so matching from c sees exactly what matching T[c:] alone sees.
Both bytes are ASCII: NFC/NFKC neither compose across them nor change them.

``newline|ascii`` (T[c-1] == "\\n", T[c] printable ASCII other than space), cl100k, Qwen2,
DeepSeek-V3.  A piece holding "\\n" can only continue over more ``[\\r\\n]`` or whitespace
(``\\s*[\\r\\n]+``, punctuation's ``[\\r\\n]*``), and whitespace-before-newline is matched by
``\\s*[\\r\\n]+`` before ``\\s+(?!\\S)`` is tried, so it ends at c both mid-text and at end of
text.  Letter prefixes ``[^\\r\\n...]?`` exclude "\\n", so nothing right of c reaches back.
o200k: the same, except that punctuation absorbs ``[\\r\\n/]*``, so T[c] must not be "/".
GPT-2 (no ``\\s*[\\r\\n]+``): ``\\s+(?!\\S)`` keeps a whitespace run whole at end of text but
hands its last char on mid-text, so the run before c must be the single "\\n" (T[c-2] printable).

Added tokens are split out first, leftmost-longest.  If no occurrence of any added token crosses
c, the split of T is the split of T[:c] followed by that of T[c:], so c stays stable.  Tokens
that strip or need word boundaries look at neighbouring whitespace of any length: near those,
a cut is refused unless the whitespace around c is short and no such token is close.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from app.tokenization.spec import AddedToken, TokenizerSpec

_ALNUM_SPACE = rb"(?<=[A-Za-z0-9])(?= )"
_NEWLINE_ASCII = rb"(?<=\n)(?=[!-~])"
_NEWLINE_ASCII_NO_SLASH = rb"(?<=\n)(?=[!-.0-~])"
_NEWLINE_AFTER_PRINTABLE = rb"(?<=[!-~]\n)(?=[!-~])"

RULES: dict[str, dict[str, bytes]] = {
    "cl100k": {"alnum|space": _ALNUM_SPACE, "newline|ascii": _NEWLINE_ASCII},
    "qwen2": {"alnum|space": _ALNUM_SPACE, "newline|ascii": _NEWLINE_ASCII},
    "deepseek_v3": {"alnum|space": _ALNUM_SPACE, "newline|ascii": _NEWLINE_ASCII},
    "o200k": {"alnum|space": _ALNUM_SPACE, "newline|ascii-but-slash": _NEWLINE_ASCII_NO_SLASH},
    "gpt2": {"alnum|space": _ALNUM_SPACE, "printable,newline|ascii": _NEWLINE_AFTER_PRINTABLE},
    "gpt2_digits": {
        "alnum|space": _ALNUM_SPACE,
        "printable,newline|ascii": _NEWLINE_AFTER_PRINTABLE,
    },
}

# How far whitespace next to a cut may reach before stripping tokens make us refuse the cut.
_STRIP_REACH = 128
_WS_OR_WIDE = re.compile(rb"[\t\n\x0b\x0c\r \x80-\xff]*")


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
        self._finder = (
            re.compile(b"(?=(" + trie_pattern(encoded) + b"))") if encoded else None
        )
        stripping = [b for t, b in zip(toks, encoded, strict=True) if t.strips]
        self._strip_finder = re.compile(trie_pattern(stripping)) if stripping else None
        # Normalized tokens are matched on normalized text: only ASCII is sure to be unchanged.
        self._ascii_only = normalizer is not None and any(t.normalized for t in toks)
        self.reach = self.longest + (_STRIP_REACH if stripping else 0)

    def allows(self, text: bytes, c: int) -> bool:
        """True when no added-token match can cross ``c`` (text within ``reach`` of c read)."""
        if self._finder is None:
            return True
        lo = max(0, c - self.longest + 1)
        if self._ascii_only and not text[lo - 1 if lo else 0 : c + self.longest].isascii():
            return False
        for match in self._finder.finditer(text, lo, c + self.longest - 1):
            if match.start() < c < match.start() + len(match.group(1)):
                return False
        if self._strip_finder is not None:
            return self._strip_allows(text, c)
        return True

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
    """The proven stable-cut rules of one tokenizer family, searchable in byte windows."""

    def __init__(self, spec: TokenizerSpec) -> None:
        if spec.family is None:
            raise ValueError(f"no proven cut rules: {spec.unproven_reason}")
        self.family = spec.family
        self.names = tuple(RULES[spec.family])
        self._candidates = re.compile(b"|".join(RULES[spec.family].values()))
        self._guard = AddedTokenGuard(spec.added_tokens, normalizer=spec.normalizer)
        # Bytes of identical text needed on each side of a cut for its verdict to carry over.
        self.context = max(self._guard.reach, 2)

    def is_stable(self, text: bytes, c: int) -> bool:
        """The rules' verdict on one position (used by tests; repair uses the searches)."""
        return (
            0 < c < len(text)
            and self._candidates.match(text, c) is not None
            and self._guard.allows(text, c)
        )

    def ascending(self, text: bytes, lo: int, hi: int) -> Iterator[int]:
        """Stable cuts c with lo <= c <= hi, left to right."""
        for match in self._candidates.finditer(text, max(lo, 1), hi + 1):
            c = match.start()
            if c <= hi and self._guard.allows(text, c):
                yield c

    def descending(self, text: bytes, lo: int, hi: int) -> Iterator[int]:
        """Stable cuts c with lo <= c <= hi, right to left."""
        starts = [m.start() for m in self._candidates.finditer(text, max(lo, 1), hi + 1)]
        for c in reversed(starts):
            if c <= hi and self._guard.allows(text, c):
                yield c
