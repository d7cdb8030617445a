"""Where two transcripts agree: the common prefix, then runs that line up again after edits.

Everything here compares bytes with C-level primitives (``startswith``/``find`` on buffers,
no copies), so the Python-level work is proportional to the number of edits, not the text.
The runs only *propose* what to reuse; repair proves every cut it makes inside them.
"""

from __future__ import annotations

from dataclasses import dataclass

_CHUNK = 1 << 16
_PROBE = 32
_PROBE_OFFSETS = (0, 16, 64, 256, 1024, 4096)
_MIN_RUN = 256
_MAX_RUNS = 64


@dataclass(frozen=True, slots=True)
class Run:
    """``old[old_start:old_start+length] == new[new_start:new_start+length]``."""

    old_start: int
    new_start: int
    length: int

    @property
    def old_end(self) -> int:
        return self.old_start + self.length

    @property
    def new_end(self) -> int:
        return self.new_start + self.length


def common_prefix(a: bytes, b: bytes, start_a: int = 0, start_b: int = 0) -> int:
    """Length of the longest common prefix of ``a[start_a:]`` and ``b[start_b:]``."""
    n = min(len(a) - start_a, len(b) - start_b)
    if n <= 0:
        return 0
    view = memoryview(a)
    if b.startswith(view[start_a : start_a + n], start_b):
        return n
    done = 0
    step = _CHUNK
    while step > 0:
        # Largest `done` whose prefix matches; chunks first, then halving inside the bad chunk.
        while done + step <= n and b.startswith(
            view[start_a + done : start_a + done + step], start_b + done
        ):
            done += step
        step //= 2
    return done


def align(old: bytes, new: bytes, prefix: int, *, search: int) -> list[Run]:
    """Runs of identical text after the first ``prefix`` bytes, in order.

    After each mismatch, short probes from one side are looked up in the next ``search`` bytes
    of the other; the candidate that skips least while re-agreeing for at least 256 bytes (or to
    the end of the old text) wins.  Runs never cross each other and both sides only move forward.
    """
    runs: list[Run] = []
    i = j = prefix
    while i < len(old) and j < len(new) and len(runs) < _MAX_RUNS:
        best: Run | None = None
        tried: set[int] = set()
        # Least skipped bytes first; the first candidate that re-agrees long enough wins.
        for oi, nj in sorted(_probe_candidates(old, new, i, j, search), key=sum):
            if oi - nj in tried:
                continue
            tried.add(oi - nj)
            # Walk back over bytes that already agree before the probe position.
            while oi > i and nj > j and old[oi - 1] == new[nj - 1]:
                oi -= 1
                nj -= 1
            length = common_prefix(old, new, oi, nj)
            if length >= min(_MIN_RUN, len(old) - oi):
                best = Run(oi, nj, length)
                break
        if best is None:
            break
        runs.append(best)
        i, j = best.old_end, best.new_end
    return runs


def _probe_candidates(old: bytes, new: bytes, i: int, j: int, search: int) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    old_view, new_view = memoryview(old), memoryview(new)
    for offset in _PROBE_OFFSETS:
        if i + offset + _PROBE <= len(old):
            probe = old_view[i + offset : i + offset + _PROBE]
            at = new.find(probe, j, j + offset + search + _PROBE)
            if at >= 0:
                found.append((i + offset, at))
        if j + offset + _PROBE <= len(new):
            probe = new_view[j + offset : j + offset + _PROBE]
            at = old.find(probe, i, i + offset + search + _PROBE)
            if at >= 0:
                found.append((at, j + offset))
    return found
