"""Stop strings cut out of text we detokenize ourselves (tokens-out upstreams).

vLLM's generate API stops at a stop string but its ``token_ids`` keep the token that completed
it, so our text would end with the stop string (or more, when that token runs past it).  The
text is cut where the first stop string begins, as the servers that return text do.  While
streaming, a tail that could still become a stop string is held back until it cannot.
"""

from __future__ import annotations


class StopTrim:
    """Feeds output text through; ``feed`` returns what may be sent now, ``end`` the rest."""

    def __init__(self, stops: list[str]) -> None:
        self._stops = [s for s in stops if s]
        self._held = ""
        self._stopped = False

    def feed(self, text: str) -> str:
        if self._stopped or not self._stops:
            return "" if self._stopped else text
        held = self._held + text
        cut = min((i for s in self._stops if (i := held.find(s)) >= 0), default=-1)
        if cut >= 0:
            self._stopped, self._held = True, ""
            return held[:cut]
        keep = max(_overlap(held, s) for s in self._stops)
        self._held = held[len(held) - keep :]
        return held[: len(held) - keep]

    def end(self) -> str:
        """The held tail, once the output is complete (it did not become a stop string)."""
        held, self._held = self._held, ""
        return held


def trimmed(text: str, stops: list[str]) -> str:
    """``text`` up to the first stop string in it."""
    trim = StopTrim(stops)
    return trim.feed(text) + trim.end()


def _overlap(text: str, stop: str) -> int:
    """The length of the longest end of ``text`` that begins ``stop`` (shorter than it)."""
    for n in range(min(len(text), len(stop) - 1), 0, -1):
        if stop.startswith(text[len(text) - n :]):
            return n
    return 0
