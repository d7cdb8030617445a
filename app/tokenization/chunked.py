"""Exact encodes of long texts on every core: cut at stable cuts, the chunks encoded in parallel.

A cold start (no stored transcript to repair from) of a 1M-character transcript keeps the
reference busy for ~0.4-0.9 s on one thread, and the engine parallelises only across texts.
A stable cut c of a text T (``boundaries``) satisfies ``tok(T) == tok(T[:c]) + tok(T[c:])``.
``ChunkedEncoder.cuts`` picks c_1 < c_2 < ... about ``chunk_bytes`` apart, each c_{k+1} with a
verdict that reads only ``T[c_k:]`` (the search region starts at c_k; the rules read bytes,
never positions), so ``c_{k+1} - c_k`` is a stable cut of the text ``T[c_k:]`` itself.  By
induction from the last cut, ``tok(T[c_k:]) == tok(T[c_k:c_{k+1}]) + tok(T[c_{k+1}:])`` for
every k, and ``tok(T)`` is the chunks' encodes one after another.  The rules are the ones repair
relies on, proven position by position in ``tests/tokenization/test_boundaries.py``; where no
cut is found the chunk simply grows, so a text without any stays one piece.

With a native encoder (``native.encoder``) the chunks go to it, on a thread pool (it runs
without the GIL), fewer and longer ones (``NATIVE_CHUNKS_PER_WORKER``); a chunk it declines,
and every chunk without one, goes to the reference.
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, Protocol

import numpy as np

from app.tokenization.boundaries import CutRules
from app.tokenization.engines import Engine, EngineParts
from app.tokenization.reference import IdArray, OffsetArray, ReferenceEncoder

PARALLEL_CHUNK = 32 << 10
"""Default chunk size: 32 chunks for a 1M-byte text, enough to keep a many-core pool busy (the
reference is also faster per byte on 32 KiB texts than on one huge one)."""
NATIVE_CHUNKS_PER_WORKER = 2
"""Chunks per pool thread, at most, that the native encoder's text is cut into (each still at
least the chunk size): every chunk costs hand-offs between the threads and its Python steps
under the GIL, and after idle time a thread meets a cold core; on 2 cores after idle, 1M
characters in 32 KiB chunks lost to one piece, in 4 chunks they gained
(``loadtest/bench_cold_start.py --engines --idle``)."""
_FIRST_WINDOW = 256
"""Bytes searched for a cut first (ordinary text has several); the window doubles from there."""
_MAX_WINDOW = 64 << 10
"""The widest window one search takes: a regex search holds the GIL, and across a few MB
without a cut (``'a' * 10_000_000``) one took ~40 ms, stalling the event loop meanwhile."""


class Encoded(NamedTuple):
    ids: IdArray
    ends: OffsetArray
    """Each token's end in bytes."""
    chunks: int
    """How many chunks were encoded in parallel; 0 when the text went whole."""
    native_bytes: int = 0
    """Bytes the native encoder encoded (the rest went to the reference)."""
    engines: EngineParts = ()
    """Which engine gave the ids, chunk by chunk (``engines``)."""


class NativeIds(Protocol):
    """``native.encoder.NativeEncoder``, as seen from here."""

    def encode(
        self, text: str, utf8: bytes | None = None
    ) -> tuple[IdArray, OffsetArray] | None: ...

    def encode_utf8(self, data: bytes) -> tuple[IdArray, OffsetArray] | None: ...

    def stats(self) -> dict[str, object]: ...

    def prepare(self, utf8: bytes) -> None: ...


_WORKERS = len(os.sched_getaffinity(0)) or 1
_POOL = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="native-chunks")
"""The threads the native encoder's chunks run on: one per core the process may run on, as
many as it has work sets (``native._native.WORK_SETS``); it holds no GIL."""


class ChunkedEncoder:
    """The reference encode of a text, in chunks of ~``chunk_bytes`` encoded in parallel when
    the text holds at least two of them; thread-safe.  ``native``: an encoder whose ids equal
    the reference's (or None where it declines), used first."""

    def __init__(
        self,
        reference: ReferenceEncoder,
        rules: CutRules,
        chunk_bytes: int,
        native: NativeIds | None = None,
        *,
        native_chunks_per_worker: int | None = NATIVE_CHUNKS_PER_WORKER,
    ) -> None:
        """``native_chunks_per_worker``: with ``native``, cut a text into at most that many
        chunks per pool thread (None: chunks of ``chunk_bytes`` as for the reference)."""
        if chunk_bytes < 0:
            raise ValueError("chunk_bytes must be 0 (one piece) or a byte count")
        self.reference = reference
        self.rules = rules
        self.chunk_bytes = chunk_bytes
        per_worker = native_chunks_per_worker if native is not None else None
        self._native_parts = per_worker * _WORKERS if per_worker else None
        self.native = native
        self._lock = threading.Lock()
        self._texts = self._chunks = 0

    def encode(self, data: bytes, text: str | None = None) -> Encoded:
        """Ids of ``data`` (UTF-8) as one text; ``text``: the same text as ``str`` when the
        caller has it (used when it is encoded whole)."""
        cuts = self.cuts(data, self._native_parts)
        if len(cuts) <= 2:
            whole = text if text is not None else data.decode("utf-8")
            native = self._native(whole, data)
            if native is not None:
                return Encoded(*native, 0, len(data), ((len(native[0]), "native"),))
            ids, ends = self.reference.encode(whole)
            return Encoded(ids, ends, 0, engines=((len(ids), "reference"),))
        spans = list(itertools.pairwise(cuts))
        with self._lock:
            self._texts += 1
            self._chunks += len(spans)
        pieces = [data[a:b] for a, b in spans]
        found: list[tuple[IdArray, OffsetArray] | None] = [None] * len(spans)
        if self.native is not None:
            self.native.prepare(data)
            found = self._natively(self.native, pieces)
        native_bytes = sum(b - a for (a, b), part in zip(spans, found, strict=True) if part)
        names: list[Engine] = ["native" if part else "reference" for part in found]
        rest = [i for i, part in enumerate(found) if part is None]  # decoded for the reference
        texts = [pieces[i].decode("utf-8") for i in rest]
        for i, part in zip(rest, self.reference.encode_many(texts), strict=True):
            found[i] = part
        parts = [part for part in found if part is not None]
        ids = np.concatenate([part_ids for part_ids, _ in parts])
        ends = np.concatenate(
            [part_ends + np.int32(a) for (a, _), (_, part_ends) in zip(spans, parts, strict=True)]
        )
        engines = tuple((len(i), name) for (i, _), name in zip(parts, names, strict=True))
        return Encoded(ids, ends, len(spans), native_bytes, engines)

    @staticmethod
    def _natively(
        native: NativeIds, pieces: list[bytes]
    ) -> list[tuple[IdArray, OffsetArray] | None]:
        """The native encodes of the chunks (None where declined), each worker thread taking
        one run of consecutive chunks: a task per chunk costs more in hand-offs (and in the
        GIL the chunks' Python parts take turns at) than a chunk's encode (measured: 1M
        characters on 2 cores in 32 chunks, 17.8 ms a task per chunk, 12.9 ms a run per
        thread)."""
        size = -(-len(pieces) // _WORKERS)
        runs = [range(lo, min(lo + size, len(pieces))) for lo in range(0, len(pieces), size)]
        done = _POOL.map(lambda run: [native.encode_utf8(pieces[i]) for i in run], runs)
        return [part for run in done for part in run]

    def _native(self, text: str, data: bytes | None) -> tuple[IdArray, OffsetArray] | None:
        """The native encoder's ids and ends of ``text`` (``data``: its UTF-8, if at hand),
        or None where there is none or it declines."""
        return self.native.encode(text, data) if self.native is not None else None

    def stats(self) -> dict[str, object]:
        """Texts encoded in chunks so far, and their chunks; the native encoder's figures."""
        with self._lock:
            figures: dict[str, object] = {
                "chunk_bytes": self.chunk_bytes, "texts": self._texts, "chunks": self._chunks,
            }  # fmt: skip
        figures["engine"] = "native" if self.native is not None else "reference"
        if self.native is not None:
            figures["native"] = self.native.stats()
        return figures

    def cuts(self, data: bytes, parts: int | None = None) -> list[int]:
        """0, the chunks' cuts and ``len(data)``: each cut the first stable one found at least
        ``chunk_bytes`` after the one before (or ``len(data) / parts``, where that is more),
        its verdict reading only the text after that one; the last chunk keeps at least
        ``chunk_bytes``."""
        n, chunk = len(data), self.chunk_bytes
        if not chunk:
            return [0, n]
        step = max(chunk, -(-n // parts)) if parts else chunk
        cuts = [0]
        lo = step
        while lo < n - chunk:
            cut = self._first_cut(data, lo, min(lo + step, n - chunk), (cuts[-1], n))
            if cut is None:
                lo += step
                continue
            cuts.append(cut)
            lo = cut + step
        cuts.append(n)
        return cuts

    def _first_cut(self, data: bytes, lo: int, hi: int, region: tuple[int, int]) -> int | None:
        """The first stable cut in [lo, hi] whose verdict reads only ``data[region]``, which
        ends where ``data`` does; searched in consecutive windows that double up to
        ``_MAX_WINDOW`` (a verdict reads only its position's neighbourhood, so the first
        window holding a cut holds the first cut)."""
        width = _FIRST_WINDOW
        while True:
            top = min(lo + width, hi)
            found = self.rules.iter_cuts(data, lo, top, region, open_ends=(False, True))
            cut = next(found, None)
            if cut is not None or top == hi:
                return cut
            lo, width = top + 1, min(2 * width, _MAX_WINDOW)
