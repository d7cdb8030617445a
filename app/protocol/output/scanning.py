"""Finding markup tags in text that arrives in pieces.

A tag split across two pieces (``"...</thi"`` then ``"nk>..."``) must not be emitted as text
before the second piece shows whether it is one, so every search also reports how much of the
tail could still grow into a tag and has to be held back.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence


def partial_tag_start(text: str, tags: Sequence[str], start: int = 0) -> int:
    """Where the longest tail of ``text[start:]`` that is a proper prefix of a tag begins.

    Returns ``len(text)`` when no tail could grow into a tag.
    """
    firsts, longest = _shape(tuple(tags))
    low = max(start, len(text) - longest + 1)
    # A tail can only grow into a tag from a tag's first character: most texts have none
    # near their end, which str.find tells without a Python loop.
    hits = [at for first in firsts if (at := text.find(first, low)) >= 0]
    for cut in range(min(hits, default=len(text)), len(text)):
        if text[cut] in firsts:
            tail = text[cut:]
            if any(tag.startswith(tail) for tag in tags):
                return cut
    return len(text)


@functools.cache
def _shape(tags: tuple[str, ...]) -> tuple[str, int]:
    """The first characters of ``tags`` and the longest one's length."""
    return "".join(sorted({tag[0] for tag in tags})), max(map(len, tags))


def find_tag(text: str, tags: Sequence[str], start: int = 0) -> tuple[int, str] | None:
    """The earliest complete occurrence of any of ``tags`` in ``text[start:]``, if any."""
    best: tuple[int, str] | None = None
    for tag in tags:
        at = text.find(tag, start)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, tag)
    return best


class ValueSkippingEnd:
    """The ``BlockEnd`` of XML-like formats whose values are bare text: a closing marker
    (any of ``closes``) ends the block only outside a value, so a value (code that mentions
    the marker) may hold it.

    A value starts at any of ``value_opens`` and ends at the first of ``value_ends`` (they
    may be the same marker, as Gemma 4's ``<|"|>`` quotes are). Where a block holds several
    calls, each of ``call_closes`` outside a value ends one (``BlockEnd``'s ``call_ends``).
    Only text not seen before is scanned.
    """

    def __init__(
        self,
        closes: Sequence[str],
        value_opens: Sequence[str],
        value_ends: Sequence[str],
        call_closes: Sequence[str] = (),
    ) -> None:
        self._outside = (*value_opens, *closes, *call_closes)
        self._inside = tuple(value_ends)
        self._closes = frozenset(closes)
        self._call_closes = frozenset(call_closes)
        self._pos = 0
        self._in_value = False
        self.call_ends: list[int] = []  # stays empty without call_closes

    def find(self, body: str) -> int | None:
        """Where a closing marker starts in ``body`` (the text after the opening marker), if
        it has arrived."""
        while True:
            tags = self._inside if self._in_value else self._outside
            hit = find_tag(body, tags, self._pos)
            if hit is None:
                self._pos = partial_tag_start(body, tags, self._pos)
                return None
            at, tag = hit
            if not self._in_value and tag in self._closes:
                return at
            self._pos = at + len(tag)
            if not self._in_value and tag in self._call_closes:
                self.call_ends.append(self._pos)
            else:
                self._in_value = not self._in_value


_SPACE = re.compile(r"\s*")


def skip_space(text: str, pos: int) -> int:
    """The first position at or after ``pos`` that is not whitespace."""
    match = _SPACE.match(text, pos)
    assert match is not None  # \s* always matches
    return match.end()
