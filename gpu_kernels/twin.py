"""The NumPy twin of the GPU cold-start path: the same array stages, runnable on any machine.

Stages, each a separate function so a CuPy kernel can replace it one at a time and be tested
against it: added tokens split first (leftmost-longest, on the raw text), the normalizer (the
reference engine's own), class lookup, the piece-start predicate, compaction into pieces, then
byte-level BPE per distinct piece (with a piece cache) and a gather back into text order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from app.tokenization.lru import LruCache
from app.tokenization.spec import spec_from_json
from gpu_kernels.byte_bpe import IdArray, MergeTable
from gpu_kernels.char_classes import ClassTable, CodePoints, code_points
from gpu_kernels.piece_starts import PREDICATES, Predicate, piece_bounds

MergeStage = Callable[[MergeTable, Sequence[bytes]], list[IdArray]]
"""(table, distinct pieces) -> each piece's ids after all merges."""


class UnsupportedTokenizer(ValueError):
    """The tokenizer is outside what the twin (and so the GPU path) reproduces exactly."""


class TwinEncoder:
    """``encode(text)`` equals ``Tokenizer.encode(text, add_special_tokens=False).ids``."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        classes: ClassTable | None = None,
        cache_bytes: int = 64 << 20,
        predicate: Predicate | None = None,
        merge: MergeStage | None = None,
    ) -> None:
        """``classes`` may be shared: it depends on the engine only, not on the tokenizer.

        ``predicate`` and ``merge`` replace the NumPy stages (with the device kernels).
        """
        document: dict[str, Any] = json.loads(tokenizer.to_str())
        spec = spec_from_json(document)
        family = spec.family
        if family is None or family not in PREDICATES:
            raise UnsupportedTokenizer(
                f"family {family!r} is not covered ({spec.unproven_reason or 'no twin yet'})"
            )
        steps = document["pre_tokenizer"].get("pretokenizers") or [document["pre_tokenizer"]]
        if len(steps) != (1 if family == "gpt2" else 2):
            # spec accepts a trailing character-removing Split (GGUF); the twin does not do it
            raise UnsupportedTokenizer(f"pre-tokenizer of {len(steps)} steps for {family}")
        if any(t.strips or t.normalized for t in spec.added_tokens):
            raise UnsupportedTokenizer("added tokens with strip or normalized flags")
        self._predicate = predicate or PREDICATES[family]
        self._normalizer = tokenizer.normalizer
        self._added = {t["content"]: int(t["id"]) for t in document["added_tokens"]}
        longest_first = sorted(self._added, key=len, reverse=True)
        self._split = re.compile("|".join(map(re.escape, longest_first))) if self._added else None
        self.classes = classes or ClassTable()
        self.merges = MergeTable(document["model"])
        self._merge = merge or MergeTable.merge
        self._cache: LruCache[bytes, IdArray] = LruCache(cache_bytes)

    @classmethod
    def from_file(cls, path: str | Path) -> TwinEncoder:
        return cls(Tokenizer.from_file(str(path)))

    def encode(self, text: str) -> IdArray:
        parts: list[IdArray] = []
        at = 0
        for match in self._split.finditer(text) if self._split else ():
            parts.append(self._encode_plain(text[at : match.start()]))
            parts.append(np.asarray([self._added[match.group()]], dtype=np.int32))
            at = match.end()
        parts.append(self._encode_plain(text[at:]))
        return np.concatenate(parts)

    def pieces(self, text: str) -> tuple[CodePoints, np.ndarray, np.ndarray]:
        """A stretch without added tokens, normalized: its code points and piece bounds."""
        if self._normalizer is not None and text:
            text = self._normalizer.normalize_str(text)
        points = code_points(text)
        classes, folds = self.classes.lookup(points)
        starts = self._predicate(classes, folds, points)
        begin, end = piece_bounds(starts)
        return points, begin, end

    def _encode_plain(self, text: str) -> IdArray:
        if not text:
            return np.zeros(0, dtype=np.int32)
        points, begin, end = self.pieces(text)
        utf8 = points_to_utf8(points)
        byte_at = np.concatenate(([0], np.cumsum(utf8_lengths(points))))
        distinct: dict[bytes, int] = {}
        which = [
            distinct.setdefault(utf8[a:b], len(distinct))
            for a, b in zip(byte_at[begin].tolist(), byte_at[end].tolist(), strict=True)
        ]
        ids = self._ids_of(list(distinct))
        return gather(ids, np.asarray(which, dtype=np.int64))

    def _ids_of(self, pieces: list[bytes]) -> list[IdArray]:
        """Ids of distinct pieces: cache, whole-word lookup, else batched BPE merge rounds."""
        out: list[IdArray | None] = [self._cache.get(p) for p in pieces]
        todo: list[int] = []
        for i, piece in enumerate(pieces):
            if out[i] is None:
                whole = self.merges.whole_word(piece)
                if whole is None:
                    todo.append(i)
                else:
                    out[i] = np.asarray([whole], dtype=np.int32)
        for i, merged in zip(
            todo, self._merge(self.merges, [pieces[i] for i in todo]), strict=True
        ):
            out[i] = merged
        result: list[IdArray] = []
        for piece, ids in zip(pieces, out, strict=True):
            assert ids is not None
            self._cache.put(piece, ids, len(piece) + ids.nbytes + 64)
            result.append(ids)
        return result


def utf8_lengths(points: CodePoints) -> np.ndarray:
    """UTF-8 byte length of each code point."""
    return 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000).astype(np.int64)


def points_to_utf8(points: CodePoints) -> bytes:
    return points.astype("<u4").tobytes().decode("utf-32-le").encode()


def gather(ids: list[IdArray], which: np.ndarray) -> IdArray:
    """Concatenate ``ids[which[0]], ids[which[1]], ...`` with one vectorised gather."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    flat = np.concatenate(ids)
    counts = lengths[which]
    total = int(counts.sum())
    first_out = np.cumsum(counts) - counts
    index = np.repeat(offsets[which] - first_out, counts) + np.arange(total)
    return flat[index]
