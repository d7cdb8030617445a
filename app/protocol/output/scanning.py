"""Finding markup tags in text that arrives in pieces.

A tag split across two pieces (``"...</thi"`` then ``"nk>..."``) must not be emitted as text
before the second piece shows whether it is one, so every search also reports how much of the
tail could still grow into a tag and has to be held back.
"""

from __future__ import annotations

from collections.abc import Sequence


def partial_tag_start(text: str, tags: Sequence[str], start: int = 0) -> int:
    """Where the longest tail of ``text[start:]`` that is a proper prefix of a tag begins.

    Returns ``len(text)`` when no tail could grow into a tag.
    """
    for cut in range(max(start, len(text) - max(map(len, tags)) + 1), len(text)):
        tail = text[cut:]
        if any(tag.startswith(tail) for tag in tags):
            return cut
    return len(text)


def find_tag(text: str, tags: Sequence[str], start: int = 0) -> tuple[int, str] | None:
    """The earliest complete occurrence of any of ``tags`` in ``text[start:]``, if any."""
    best: tuple[int, str] | None = None
    for tag in tags:
        at = text.find(tag, start)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, tag)
    return best
