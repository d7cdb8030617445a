"""Incremental BPE: read bytes one at a time, keep the exact BPE of everything read, and hand
out each token as soon as no continuation of the text can change it.

Why this works (see the package modules for each step): BPE is prefix-consistent, so the
tokenization of a text is the tokenization of the text before its last token, plus that token.
Knowing the last token of every prefix is therefore enough, and the last token of ``s + c`` is
found from a few last tokens of shorter prefixes: an Aho-Corasick step gives the longest token
ending the text, and a centroid search over that token's suffix tokens finds the deepest one
passing a one-compare interval test.  Per byte: O(1) for the automaton (a blocked transition
table) and O(log^2 t) for the search, t the longest token, worst case; eager output adds an
amortized O(1) (each position joins a constant number of chain meets, each a short walk).

Why C: the per-byte loop is a few dozen integer operations, so any interpreter overhead
dominates.  A small CPython extension (``_core.c``, built by ``pip install``) costs nothing at
import and nothing per process, needs only the compiler every install of this package already
has, and keeps the tables in NumPy arrays shared with Python.  numba would add LLVM (a large
dependency) and a JIT warm-up in every worker process.
"""

from __future__ import annotations

from pathlib import Path

from app.tokenization.incremental_bpe._core import Engine, State
from app.tokenization.incremental_bpe.tables import NAMES, default_cache_dir, load_tables


class IncrementalState:
    """The tokenization of the bytes fed so far.

    ``feed`` returns the ids that became final; ``pending()`` the ids after them (they may still
    change); ``ids()`` all ids since ``start()`` or since ``restore()``.  ``dump()`` serializes
    only what later bytes need: the last tokens of the final ``max token length`` positions and
    of the pending span.
    """

    __slots__ = ("_core", "_dropped", "_final")

    def __init__(self, core: State, dropped: bytes) -> None:
        self._core = core
        self._dropped = dropped
        self._final: list[int] = []

    def feed(self, data: bytes | bytearray | memoryview) -> list[int]:
        if self._dropped:
            data = bytes(data).translate(None, self._dropped)
        ids = self._core.feed(data)
        self._final.extend(ids)
        return ids

    def pending(self) -> list[int]:
        return self._core.pending()

    def ids(self) -> list[int]:
        return self._final + self._core.pending()

    @property
    def consumed(self) -> int:
        """Bytes the engine read (counting those before a restore; dropped bytes excluded)."""
        return self._core.consumed

    @property
    def final_bytes(self) -> int:
        """Bytes covered by final ids."""
        return self._core.final_bytes

    def dump(self) -> bytes:
        return self._core.dump()


class IncrementalBPE:
    """The BPE model of a tokenizer.json, applied to the whole byte string (no pre-split)."""

    def __init__(self, engine: Engine, digest: str, dropped: bytes) -> None:
        self._engine = engine
        self._dropped = dropped
        self.digest = digest  # SHA-256 of the tokenizer file

    @classmethod
    def from_file(
        cls, path: str | Path, *, cache_dir: Path | None = None, use_cache: bool = True
    ) -> IncrementalBPE:
        """Tables are cached under ``cache_dir`` (default ``$TOKSPLICE_IBPE_CACHE`` or
        ``~/.cache/toksplice/incremental_bpe``) keyed by the file's SHA-256."""
        directory = (cache_dir or default_cache_dir()) if use_cache else None
        digest, tables = load_tables(Path(path), directory)
        engine = Engine(tuple(tables[name] for name in NAMES))
        return cls(engine, digest, tables["dropped"].tobytes())

    def start(self, *, eager: bool = True) -> IncrementalState:
        """A state at the empty text; ``eager=False`` keeps every id pending until asked."""
        return IncrementalState(self._engine.start(eager), self._dropped)

    def restore(self, blob: bytes, *, eager: bool = True) -> IncrementalState:
        return IncrementalState(self._engine.restore(blob, eager), self._dropped)

    def encode(self, data: bytes) -> list[int]:
        """The whole tokenization of ``data`` at once."""
        state = self.start(eager=False)
        state.feed(data)
        return state.pending()
