"""Byte-level BPE over many pieces at once, as array rounds (the twin of one thread per piece).

Hugging Face's BPE merges, in each piece (a "word"), the adjacent pair with the lowest merge
rank, the leftmost one among equal ranks, until no pair has a rank.  Several occurrences of the
best pair cannot be merged in one step: tiktoken-derived merge lists (cl100k, Llama-3, o200k)
are not monotone (a merge may rank below the merge that made its input), so a merge can create
a pair that HF takes before the next occurrence.  Each round therefore merges exactly one pair
in every piece that still has one: per piece it is HF's sequence of merges, and all pieces
advance together, which is what a GPU thread (or warp) per piece does.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from app.byte_level import bytes_to_unicode

IdArray = npt.NDArray[np.int32]
_NO_RANK = np.iinfo(np.int64).max


PAIR_HASH = 0x9E3779B97F4A7C15
"""Multiplier of the pair hash (Fibonacci hashing: the key times this, top bits)."""


class PairSlots(NamedTuple):
    """The merges as an open-addressing table: a pair's key hashes to ``(key * PAIR_HASH) >>
    shift``, probing on (+1, within ``mask``) to its key or an empty slot (key -1)."""

    keys: npt.NDArray[np.int64]
    ranks: npt.NDArray[np.int32]
    merged: IdArray
    shift: int
    mask: int


class MergeTable:
    """A byte-level BPE model: byte ids, merge ranks as a sorted pair-key array, whole words.

    A pair (a, b) has key ``a * width + b``; ``pair_keys`` is sorted, and ``pair_ranks`` and
    ``pair_merged`` give each key's merge rank and merged id (the arrays a kernel reads).
    """

    def __init__(self, model: Mapping[str, Any]) -> None:
        vocab: dict[str, int] = model["vocab"]
        if (
            model.get("byte_fallback")
            or model.get("continuing_subword_prefix")
            or model.get("end_of_word_suffix")
        ):
            raise ValueError("only plain byte-level BPE is supported")
        symbol = bytes_to_unicode()
        self.byte_ids = np.asarray([vocab.get(symbol[b], -1) for b in range(256)], dtype=np.int32)
        """Each byte's id; -1 for a byte the vocabulary lacks (``EncoderPlan`` checks that the
        pre-tokenizer drops it)."""
        self._to_bytes = {char: byte for byte, char in symbol.items()}
        self.ignore_merges = bool(model.get("ignore_merges", False))
        self._vocab = vocab
        self.width = np.int64(max(vocab.values()) + 1)
        pairs = [m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"]]
        left = np.asarray([vocab[a] for a, _ in pairs], dtype=np.int64)
        right = np.asarray([vocab[b] for _, b in pairs], dtype=np.int64)
        keys = left * self.width + right
        order = np.argsort(keys)
        self.pair_keys, self.pair_ranks = keys[order], order.astype(np.int64)
        if np.any(self.pair_keys[1:] == self.pair_keys[:-1]):
            raise ValueError("a merge pair is listed twice")
        self.pair_merged = np.asarray([vocab[a + b] for a, b in pairs], dtype=np.int32)[order]

    def whole_word(self, piece: bytes) -> int | None:
        """The piece's own id when ``ignore_merges`` looks it up before merging, else None."""
        return self.words.get(piece) if self.ignore_merges else None

    def pair_slots(self) -> PairSlots:
        """The merges (``pair_keys`` and friends) as the device's hash table."""
        bits = max(1, (2 * len(self.pair_keys)).bit_length())
        mask, shift = (1 << bits) - 1, 64 - bits
        keys = np.full(1 << bits, -1, dtype=np.int64)
        ranks = np.zeros(1 << bits, dtype=np.int32)
        merged = np.zeros(1 << bits, dtype=np.int32)
        home = (self.pair_keys.astype(np.uint64) * np.uint64(PAIR_HASH)) >> np.uint64(shift)
        for entry, slot in enumerate(home.tolist()):
            while keys[slot] >= 0:
                slot = (slot + 1) & mask
            keys[slot] = self.pair_keys[entry]
            ranks[slot] = self.pair_ranks[entry]
            merged[slot] = self.pair_merged[entry]
        return PairSlots(keys, ranks, merged, shift, mask)

    @functools.cached_property
    def words(self) -> dict[bytes, int]:
        """The vocabulary as byte strings (entries with a non-byte-level symbol left out)."""
        # Each symbol becomes the Latin-1 character of its byte, any other character one that
        # Latin-1 cannot encode (so the entry is left out).
        table = {ord(char): chr(byte) for char, byte in self._to_bytes.items()}
        table |= {c: "\uffff" for c in range(256) if chr(c) not in self._to_bytes}
        out: dict[bytes, int] = {}
        for token, i in self._vocab.items():
            with contextlib.suppress(UnicodeEncodeError):
                out[token.translate(table).encode("latin-1")] = i
        return out

    def byte_lengths(self) -> dict[int, int]:
        """The bytes of each id the vocabulary spells in byte-level symbols."""
        return {i: len(word) for word, i in self.words.items()}

    def merge(self, pieces: Sequence[bytes]) -> list[IdArray]:
        """The ids of each piece after all its merges."""
        if not pieces:
            return []
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        tokens = self.byte_ids[np.frombuffer(b"".join(pieces), dtype=np.uint8)]
        owner = np.repeat(np.arange(len(pieces)), lengths)
        done_tokens: list[IdArray] = []
        done_owner: list[npt.NDArray[np.int64]] = []
        while len(tokens):
            rank, slot = self._pair_ranks(tokens, owner)
            opens = _opens(owner)
            best = np.minimum.reduceat(rank, np.flatnonzero(opens))
            local = np.cumsum(opens) - 1
            finished = (best == _NO_RANK)[local]
            done_tokens.append(tokens[finished])
            done_owner.append(owner[finished])
            hit = np.flatnonzero((rank == best[local]) & ~finished)
            leftmost = hit[_opens(owner[hit])]
            tokens = tokens.copy()
            tokens[leftmost] = self.pair_merged[slot[leftmost]]
            keep = ~finished
            keep[leftmost + 1] = False
            tokens, owner = tokens[keep], owner[keep]
        flat_owner = np.concatenate(done_owner)
        order = np.argsort(flat_owner, kind="stable")
        flat = np.concatenate(done_tokens)[order]
        counts = np.bincount(flat_owner, minlength=len(pieces))
        return np.split(flat.astype(np.int32), np.cumsum(counts)[:-1])

    def _pair_ranks(
        self, tokens: IdArray, owner: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Rank of the pair starting at each token (none at a piece's last token) and its slot."""
        keys = tokens[:-1].astype(np.int64) * self.width + tokens[1:]
        slot = np.minimum(np.searchsorted(self.pair_keys, keys), len(self.pair_keys) - 1)
        found = (self.pair_keys[slot] == keys) & (owner[:-1] == owner[1:])
        rank = np.append(np.where(found, self.pair_ranks[slot], _NO_RANK), _NO_RANK)
        return rank, np.append(slot, 0)


def _opens(owner: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """True at the first entry of each piece (``owner`` is sorted)."""
    opens = np.ones(len(owner), dtype=bool)
    opens[1:] = owner[1:] != owner[:-1]
    return opens
