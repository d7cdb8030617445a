"""Character BPE with byte fallback (SentencePiece-style tokenizer.json files such as Gemma's),
as the native encoder merges it.

The merges are a ``MergeTable``'s (pairs of ids, whatever the ids spell).  What differs is where
a piece starts from: each character's own id, or, for a character the vocabulary lacks, the ids
of its UTF-8 bytes' fallback tokens ``<0xXX>`` (HF's ``byte_fallback``).  A space is the id of
the mark the normalizer writes for it (``Replace(" ", "▁")``), so the text need not be rewritten.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from gpu_kernels.byte_bpe import MergeTable

CODE_POINTS = 0x110001
"""Entries of ``char_ids``: every code point, and one past them (the native tables' size)."""


class CharacterMergeTable(MergeTable):
    """``char_ids[cp]``: each code point's id (-1: its bytes fall back to ``byte_ids``, the
    ``<0xXX>`` tokens); a space has the id of ``space`` (the normalizer's mark)."""

    def __init__(self, model: Mapping[str, Any], space: str) -> None:
        if model.get("ignore_merges"):
            raise ValueError("character BPE with ignore_merges is not supported")
        super().__init__({**model, "byte_fallback": False})
        vocab: dict[str, int] = model["vocab"]
        self.space = space
        self.byte_ids = np.asarray(
            [vocab.get(f"<0x{b:02X}>", -1) for b in range(256)], dtype=np.int32
        )
        singles = [(ord(token), i) for token, i in vocab.items() if len(token) == 1]
        self.char_ids = np.full(CODE_POINTS, -1, dtype=np.int32)
        points, ids = zip(*singles, strict=True) if singles else ((), ())
        self.char_ids[list(points)] = ids
        self.char_ids[ord(" ")] = vocab[space]
        self._chars = vocab

    @functools.cached_property
    def words(self) -> dict[bytes, int]:
        """No whole words: ``ignore_merges`` is off."""
        return {}

    def byte_lengths(self) -> dict[int, int]:
        """Bytes of the original text each id covers: a fallback token one, any other its
        text with each mark a space (a literal mark in the text is declined before)."""
        spaced = {i: token.replace(self.space, " ") for token, i in self._chars.items()}
        lengths = {i: len(text.encode()) for i, text in spaced.items()}
        lengths.update((int(i), 1) for i in self.byte_ids if i >= 0)
        return lengths
