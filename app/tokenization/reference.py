"""The reference encoder (Hugging Face ``tokenizers``) with results as compact arrays.

Every id toksplice emits comes from here: repair only decides which stretches of text to hand
to it and which earlier ids are provably unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

IdArray = npt.NDArray[np.int32]
"""Token ids, int32."""
OffsetArray = npt.NDArray[np.int32]
"""Byte offsets into UTF-8 text (token end positions), int32: texts stay under 2 GiB."""


@dataclass(frozen=True, slots=True)
class CopiedIds:
    """Stretches of an id array copied from an earlier one: for each ``(first, last, at)``,
    ``ids[at : at + last - first]`` is ``source[first:last]``."""

    source: IdArray
    runs: tuple[tuple[int, int, int], ...]


class ReferenceEncoder:
    """Encodes UTF-8 fragments as standalone texts; ends are byte offsets within the fragment."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.frame = special_frame(tokenizer)

    @classmethod
    def from_file(cls, path: str | Path) -> ReferenceEncoder:
        return cls(Tokenizer.from_file(str(path)))

    def encode(self, text: str) -> tuple[IdArray, OffsetArray]:
        """Ids of ``text`` without post-processor specials, and each token's end in bytes."""
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        ids = np.asarray(enc.ids, dtype=np.int32)
        if not len(ids):
            return ids, np.zeros(0, dtype=np.int32)
        char_ends = np.asarray(enc.offsets, dtype=np.int32)[:, 1]
        if text.isascii():
            return ids, char_ends
        return ids, char_to_byte_offsets(text)[char_ends]


def char_to_byte_offsets(text: str) -> OffsetArray:
    """``table[k]`` is the UTF-8 byte offset of character k (``table[len(text)]`` the length)."""
    code_points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    widths = (
        1
        + (code_points >= 0x80).astype(np.int32)
        + (code_points >= 0x800)
        + (code_points >= 0x10000)
    )
    table = np.zeros(len(code_points) + 1, dtype=np.int32)
    np.cumsum(widths, out=table[1:])
    return table


def special_frame(tokenizer: Tokenizer) -> tuple[IdArray, IdArray] | None:
    """The ids the post-processor puts before and after a text (BOS/EOS), found by probing.

    None when they are not one fixed frame around the plain ids (then such encodes go whole).
    """
    frames = set()
    for probe in ("a", "Hello world\n12", " <x> "):
        plain = tokenizer.encode(probe, add_special_tokens=False).ids
        full = tokenizer.encode(probe, add_special_tokens=True).ids
        for start in range(len(full) - len(plain) + 1):
            if full[start : start + len(plain)] == plain:
                frames.add((tuple(full[:start]), tuple(full[start + len(plain) :])))
                break
        else:
            return None
    if len(frames) != 1:
        return None
    prefix, suffix = frames.pop()
    return np.asarray(prefix, dtype=np.int32), np.asarray(suffix, dtype=np.int32)
