"""Stop strings cut out of text we detokenize ourselves (tokens-out upstreams).

vLLM's generate API stops at a stop string but its ``token_ids`` keep the token that completed
it, so our text would end with the stop string (or more, when that token runs past it).  The
text is cut where the first stop string begins, as the servers that return text do.  While
streaming, a tail that could still become a stop string is held back until it cannot.

All stop strings are matched at once by an Aho-Corasick automaton: each character of the
output costs one transition whatever the number of stops (a client may send thousands), and
the state carried between pieces is the held-back tail itself.
"""

from __future__ import annotations

import re


class StopStrings:
    """The automaton of a request's stop strings; built once, shared by its ``StopTrim``s.

    State 0 is the empty string; a state stands for the longest end of the text so far that
    begins some stop string.  ``_longest[s]``: the length of the longest stop string ending
    the state's string (0: none), over the state and its suffix links."""

    def __init__(self, stops: list[str]) -> None:
        goto: list[dict[str, int]] = [{}]
        depth = [0]
        longest = [0]
        for stop in filter(None, stops):
            state = 0
            for char in stop:
                nxt = goto[state].get(char)
                if nxt is None:
                    nxt = goto[state][char] = len(goto)
                    goto.append({})
                    depth.append(depth[state] + 1)
                    longest.append(0)
                state = nxt
            longest[state] = len(stop)
        fail = [0] * len(goto)
        queue = list(goto[0].values())
        for state in queue:  # breadth first: a state's suffix link is resolved before it
            for char, nxt in goto[state].items():
                link = fail[state]
                while link and char not in goto[link]:
                    link = fail[link]
                fail[nxt] = goto[link].get(char, 0)
                longest[nxt] = max(longest[nxt], longest[fail[nxt]])
                queue.append(nxt)
        self._goto, self._fail, self._depth, self._longest = goto, fail, depth, longest
        self.max_length = max(depth)
        firsts = "".join(goto[0])
        self._start = re.compile(f"[{re.escape(firsts)}]") if firsts else None
        """Finds the next character that can begin a stop string (skipped text stays in 0)."""

    @property
    def empty(self) -> bool:
        return self._start is None

    def scan(self, state: int, text: str, offset: int) -> tuple[int, int | None]:
        """(state after ``text``, start of the earliest stop string ending in it or None).
        Starts count from ``offset`` characters before ``text`` (the held tail)."""
        goto, fail, longest = self._goto, self._fail, self._longest
        start = self._start
        assert start is not None
        cut: int | None = None
        at, end = 0, len(text)
        while at < end:
            if state == 0:
                found = start.search(text, at)
                if found is None:
                    return 0, cut
                at = found.start()
            char = text[at]
            while state and char not in goto[state]:
                state = fail[state]
            state = goto[state].get(char, 0)
            at += 1
            if longest[state]:
                begins = offset + at - longest[state]
                cut = begins if cut is None else min(cut, begins)
            if cut is not None and offset + at - self.max_length >= cut:
                break  # every stop string ending later begins after ``cut``
        return state, cut

    def depth(self, state: int) -> int:
        return self._depth[state]


class StopTrim:
    """Feeds output text through; ``feed`` returns what may be sent now, ``end`` the rest."""

    def __init__(self, stops: list[str] | StopStrings) -> None:
        self._stops = stops if isinstance(stops, StopStrings) else StopStrings(stops)
        self._state = 0
        self._held = ""
        self._pending: int | None = None
        """A stop string's start in the held tail, while one begun before it may still end."""
        self._stopped = False

    def feed(self, text: str) -> str:
        if self._stopped or self._stops.empty:
            return "" if self._stopped else text
        held = self._held
        self._state, cut = self._stops.scan(self._state, text, len(held))
        if self._pending is not None:
            cut = self._pending if cut is None else min(cut, self._pending)
        whole = held + text
        open_at = len(whole) - self._stops.depth(self._state)  # where a stop may still begin
        if cut is not None and cut <= open_at:
            self._stopped, self._held, self._pending = True, "", None
            return whole[:cut]
        self._held = whole[open_at:]
        self._pending = None if cut is None else cut - open_at
        return whole[:open_at]

    def end(self) -> str:
        """The held tail, once the output is complete, up to the stop string found in it."""
        held, self._held = self._held, ""
        return held if self._pending is None else held[: self._pending]


def trimmed(text: str, stops: list[str] | StopStrings) -> str:
    """``text`` up to the first stop string in it."""
    trim = StopTrim(stops)
    return trim.feed(text) + trim.end()
