"""The vocabulary as an open-addressing hash table of byte strings, for the device.

Vocabularies with ``ignore_merges`` (Llama-3) look a piece up whole before merging.  On the
host that is a dict; the device probes this table instead: FNV-1a of the piece's bytes, linear
probing, and a byte-for-byte comparison with the entry, so a hash collision costs a probe,
never a wrong id.  ``lookup`` is the same probe in Python (the kernel's twin).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


def fnv1a(data: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """FNV-1a (64 bit) of each string ``data[at[i]:at[i + 1]]``, vectorised over strings."""
    lengths = np.diff(at)
    hashes = np.full(len(lengths), FNV_OFFSET, dtype=np.uint64)
    for k in range(int(lengths.max(initial=0))):
        live = np.flatnonzero(lengths > k)
        hashes[live] ^= data[at[live] + k].astype(np.uint64)
        hashes[live] *= np.uint64(FNV_PRIME)
    return hashes


class WholeWords:
    """``slots`` (entry or -1) over entries ``bytes[at[e]:at[e + 1]] -> ids[e]``."""

    def __init__(self, words: Mapping[bytes, int]) -> None:
        items = sorted(words.items())
        lengths = np.fromiter((len(word) for word, _ in items), dtype=np.int64, count=len(items))
        self.at = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        self.bytes = np.frombuffer(b"".join(word for word, _ in items) or b"\0", dtype=np.uint8)
        self.ids = np.asarray([i for _, i in items] or [0], dtype=np.int32)
        self.max_len = int(lengths.max(initial=0))
        size = 1 << max(1, (2 * len(items)).bit_length())
        self.mask = size - 1
        slots = [-1] * size
        for entry, digest in enumerate(fnv1a(self.bytes, self.at).tolist()):
            slot = digest & self.mask
            while slots[slot] >= 0:
                slot = (slot + 1) & self.mask
            slots[slot] = entry
        self.slots = np.asarray(slots, dtype=np.int32)

    def lookup(self, piece: bytes) -> int | None:
        """The id of ``piece`` when it is a word of the table, probed as the kernel probes."""
        if len(piece) > self.max_len:
            return None
        digest = FNV_OFFSET
        for byte in piece:
            digest = ((digest ^ byte) * FNV_PRIME) & _MASK64
        slot = digest & self.mask
        while (entry := int(self.slots[slot])) >= 0:
            if self.bytes[self.at[entry] : self.at[entry + 1]].tobytes() == piece:
                return int(self.ids[entry])
            slot = (slot + 1) & self.mask
        return None
