"""Exact ids of a transcript split at special tokens, reusing the session's previous call.

Hugging Face encodes a text by first splitting it at special-token matches and then encoding
each piece between them on its own.  ``PieceEncoder`` does the same with the pieces' special
matching off (user-typed special text stays text, see ``typed_specials``), and between calls
of a session reuses what cannot have changed:

* the matches and pieces that end at least one special-token length before the first
  difference from the previous text (a match is found scanning left to right, so the scan of
  the identical prefix is identical);
* everything from the first match, found by scanning the new text from the change onwards,
  that coincides with a match of the previous text inside their common suffix: the scan
  resumes from the same state over identical text, so every later match and piece is the same.

Pieces in between come from a per-tenant cache of piece texts (an unchanged message renders
to the same piece) or are encoded.  Sentinel characters in the text stand for typed special
tokens; a previous state is reused only when every sentinel it holds means the same token.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.tokenization.lru import LruCache
from app.tokenization.reference import IdArray

_CHUNK = 1 << 16
Positions = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class PieceState:
    """One call's text (with sentinels), its special matches and the ids."""

    text: str
    sentinels: dict[str, str]
    starts: Positions
    ends: Positions
    id_index: Positions
    """Index in ``ids`` of each match's special-token id."""
    ids: IdArray

    @property
    def nbytes(self) -> int:
        return 4 * len(self.text) + self.ids.nbytes + 3 * self.starts.nbytes


@dataclass(slots=True)
class _Builder:
    ids: list[IdArray]
    starts: list[int]
    ends: list[int]
    id_index: list[int]
    count: int = 0
    reused: int = 0

    def add_ids(self, ids: IdArray, *, reused: bool) -> None:
        self.ids.append(ids)
        self.count += len(ids)
        self.reused += len(ids) if reused else 0

    def add_match(self, start: int, end: int, special: IdArray) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.id_index.append(self.count)
        self.add_ids(special, reused=False)


class PieceEncoder:
    def __init__(
        self,
        find: re.Pattern[str],
        special_ids: dict[str, IdArray],
        encode_piece: Callable[[str], IdArray],
        *,
        cache_bytes: int,
    ) -> None:
        self._find = find
        self._special_ids = special_ids
        self._encode_piece = encode_piece
        self._longest = max(map(len, special_ids))
        self._pieces: LruCache[tuple[str, str], IdArray] = LruCache(cache_bytes // 2)
        self._states: LruCache[str, PieceState] = LruCache(cache_bytes // 2)

    def encode(
        self,
        text: str,
        sentinels: dict[str, str],
        restore: Callable[[str], str],
        *,
        session: str,
        tenant: str,
    ) -> tuple[IdArray, int]:
        """(ids, how many came from the previous call or the piece cache)."""
        old = self._states.get(session)
        if old is not None and any(sentinels.get(s) != t for s, t in old.sentinels.items()):
            old = None
        out = _Builder([], [], [], [])
        position = self._reuse_prefix(old, text, out) if old is not None else 0
        tail = _common_suffix(old.text, text, position) if old is not None else 0
        for match in self._find.finditer(text, position):
            if old is not None and self._take_over(
                old, text, tail, match, position, out, restore, tenant
            ):
                break
            self._piece(text[position : match.start()], restore, tenant, out)
            out.add_match(match.start(), match.end(), self._special_ids[match.group()])
            position = match.end()
        else:
            self._piece(text[position:], restore, tenant, out)
        ids = np.concatenate(out.ids) if out.ids else np.zeros(0, dtype=np.int32)
        state = PieceState(
            text,
            dict(sentinels),
            np.asarray(out.starts, np.int64),
            np.asarray(out.ends, np.int64),
            np.asarray(out.id_index, np.int64),
            ids,
        )
        self._states.put(session, state, state.nbytes)
        return ids, out.reused

    def stats(self) -> dict[str, int]:
        pieces, states = self._pieces.stats(), self._states.stats()
        return {
            "pieces": pieces["entries"],
            "sessions": states["entries"],
            "bytes": pieces["bytes"] + states["bytes"],
        }

    def _reuse_prefix(self, old: PieceState, text: str, out: _Builder) -> int:
        """Copies the old matches (and ids) that end safely inside the common prefix; returns
        where scanning resumes."""
        safe = _common_prefix(old.text, text) - self._longest
        kept = int(np.searchsorted(old.ends, safe, side="right"))
        if not kept:
            return 0
        last = int(old.id_index[kept - 1])
        out.add_ids(old.ids[: last + 1], reused=True)
        out.starts.extend(old.starts[:kept].tolist())
        out.ends.extend(old.ends[:kept].tolist())
        out.id_index.extend(old.id_index[:kept].tolist())
        return int(old.ends[kept - 1])

    def _take_over(
        self,
        old: PieceState,
        text: str,
        tail: int,
        match: re.Match[str],
        position: int,
        out: _Builder,
        restore: Callable[[str], str],
        tenant: str,
    ) -> bool:
        """When ``match`` is an old match inside the common suffix, finishes ``out`` from the
        old state and returns True."""
        shift = len(text) - len(old.text)
        at = match.start() - shift
        if at < len(old.text) - tail:
            return False
        j = int(np.searchsorted(old.starts, at))
        if j == len(old.starts) or old.starts[j] != at or old.ends[j] != match.end() - shift:
            return False
        self._piece(text[position : match.start()], restore, tenant, out)
        first = int(old.id_index[j])
        base = out.count
        out.add_ids(old.ids[first:], reused=True)
        out.starts.extend((old.starts[j:] + shift).tolist())
        out.ends.extend((old.ends[j:] + shift).tolist())
        out.id_index.extend((old.id_index[j:] - first + base).tolist())
        return True

    def _piece(self, piece: str, restore: Callable[[str], str], tenant: str, out: _Builder) -> None:
        if not piece:
            return
        text = restore(piece)
        key = (tenant, text)
        found = self._pieces.get(key)
        if found is not None:
            out.add_ids(found, reused=True)
            return
        found = self._encode_piece(text)
        self._pieces.put(key, found, 4 * len(text) + found.nbytes)
        out.add_ids(found, reused=False)


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of two strings, by chunked C-level comparison."""
    n = min(len(a), len(b))
    lo = 0
    while lo < n:
        hi = min(n, lo + _CHUNK)
        if a[lo:hi] != b[lo:hi]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[lo:mid] == b[lo:mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo = hi
    return n


def _common_suffix(a: str, b: str, floor: int) -> int:
    """Length of the common suffix of two strings, not reaching below ``floor`` in either."""
    n = min(len(a), len(b)) - floor
    la, lb = len(a), len(b)
    lo = 0
    while lo < n:
        hi = min(n, lo + _CHUNK)
        if a[la - hi : la - lo] != b[lb - hi : lb - lo]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[la - mid : la - lo] == b[lb - mid : lb - lo]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo = hi
    return max(n, 0)
