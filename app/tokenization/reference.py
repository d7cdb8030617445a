"""The reference encoder (Hugging Face ``tokenizers``) with results as compact arrays.

Every id toksplice emits comes from here: repair only decides which stretches of text to hand
to it and which earlier ids are provably unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from unicodedata import is_normalized

import numpy as np
import numpy.typing as npt
from tokenizers import Encoding, Tokenizer

from app.byte_level import bytes_to_unicode
from app.errors import TokenizerSpecError
from app.tokenization.reference_process import (
    PROCESS_CHARS,
    ReferenceProcess,
    ReferenceProcessLost,
)
from app.tokenizer_spec import NormalForm, normalizer_kind

IdArray = npt.NDArray[np.int32]
"""Token ids, int32."""
OffsetArray = npt.NDArray[np.int32]
"""Byte offsets into UTF-8 text (token end positions), int32: texts stay under 2 GiB."""
_SLICE = 1 << 16
"""Ids (or offsets) converted to an array at a time: a conversion holds the GIL, ~25-50 ns an
id, and the event loop waits while any thread holds it."""


@dataclass(frozen=True, slots=True)
class CopiedIds:
    """Stretches of an id array copied from an earlier one: for each ``(first, last, at)``,
    ``ids[at : at + last - first]`` is ``source[first:last]``."""

    source: IdArray
    runs: tuple[tuple[int, int, int], ...]


class ReferenceEncoder:
    """Encodes UTF-8 fragments as standalone texts; ends are byte offsets within the fragment.

    For byte-level BPE vocabularies the ends come from each token's byte length (HF then skips
    tracking offsets, a quarter of its time), whenever that is provably right for the text: the
    normalizer leaves it unchanged and the tokens' bytes add up to the text's (a stage that
    drops or absorbs characters would leave them short).  Otherwise from HF's offsets, which
    put a token that ends inside a character at that character's end: either way exactly the
    tokens that end at a character boundary say so, and cuts are only ever made there.

    A text of at least ``process_chars`` characters is encoded by the same code in a child
    process (``reference_process``), in-thread when that child dies; None: always in-thread."""

    def __init__(self, tokenizer: Tokenizer, *, process_chars: int | None = PROCESS_CHARS) -> None:
        self.tokenizer = tokenizer
        self.frame = special_frame(tokenizer)
        serialized = tokenizer.to_str()
        self._byte_lengths, self._normal_form = _byte_level_lengths(tokenizer, serialized)
        self._process_chars = process_chars
        self._process = ReferenceProcess(tokenizer) if process_chars is not None else None

    @classmethod
    def from_file(cls, path: str | Path) -> ReferenceEncoder:
        """Raises ``TokenizerSpecError`` naming the file when ``tokenizers`` cannot load it or
        its model has no vocabulary (nothing could be encoded)."""
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception with its parser's words
            problem = f"the tokenizers library cannot load it: {exc}"
            raise TokenizerSpecError(f"{path}: {problem}") from None
        if tokenizer.get_vocab_size(with_added_tokens=False) == 0:
            raise TokenizerSpecError(f"{path}: its model's vocabulary is empty")
        return cls(tokenizer)

    def encode(self, text: str) -> tuple[IdArray, OffsetArray]:
        """Ids of ``text`` without post-processor specials, and each token's end in bytes."""
        return self.encode_many([text])[0]

    def encode_many(self, texts: Sequence[str]) -> list[tuple[IdArray, OffsetArray]]:
        """``encode`` of each text, the batch encoded by the engine on its thread pool (Rayon:
        one thread per core, ``RAYON_NUM_THREADS`` to change), so the texts run in parallel;
        the long ones in the child process."""
        limit = self._process_chars
        far = [i for i, t in enumerate(texts) if limit is not None and len(t) >= limit]
        if self._process is None or not far:
            return self._encode_here(texts)
        found = dict(zip(far, self._far([texts[i] for i in far]), strict=True))
        near = [i for i in range(len(texts)) if i not in found]
        found.update(zip(near, self._encode_here([texts[i] for i in near]), strict=True))
        return [found[i] for i in range(len(texts))]

    def _far(self, texts: list[str]) -> list[tuple[IdArray, OffsetArray]]:
        assert self._process is not None
        try:
            return self._process.encode_many(texts)
        except ReferenceProcessLost:  # the contract first: encode them here instead
            return self._encode_here(texts)

    def _encode_here(self, texts: Sequence[str]) -> list[tuple[IdArray, OffsetArray]]:
        found: list[tuple[IdArray, OffsetArray] | None] = [None] * len(texts)
        form = self._normal_form
        if self._byte_lengths is not None:
            fast = [i for i, t in enumerate(texts) if form is None or is_normalized(form, t)]
            batch = self.tokenizer.encode_batch_fast(
                [texts[i] for i in fast], add_special_tokens=False
            )
            for i, enc in zip(fast, _released(batch), strict=True):
                ids = int32_array(enc.ids)
                ends = self.ends_from_lengths(ids, len(texts[i].encode("utf-8")))
                if ends is not None:
                    found[i] = ids, ends
        rest = [i for i, result in enumerate(found) if result is None]
        if rest:
            batch = self.tokenizer.encode_batch([texts[i] for i in rest], add_special_tokens=False)
            for i, enc in zip(rest, _released(batch), strict=True):
                found[i] = _from_offsets(texts[i], enc)
        return cast(list[tuple[IdArray, OffsetArray]], found)

    def ends_from_lengths(self, ids: IdArray, text_bytes: int) -> OffsetArray | None:
        """Each token's end from the tokens' byte lengths, when those add up to the text's
        ``text_bytes`` and the vocabulary is byte-level; else None.  Right only for ids of a
        text the normalizer leaves as it is (the caller's to know)."""
        if self._byte_lengths is None:
            return None
        ends = np.cumsum(self._byte_lengths[ids], dtype=np.int32)
        return ends if (ends[-1] if len(ends) else 0) == text_bytes else None


def _released(batch: list[Encoding]) -> Iterator[Encoding]:
    """The encodings of ``batch`` in order, each let go of by the list once handed out: one
    dropped with the list would free every token of the batch in one call under the GIL
    (~25 ms for 2.5M tokens); this way each goes as its turn ends."""
    batch.reverse()
    while batch:
        yield batch.pop()


def int32_array(listed: list[int] | list[tuple[int, int]]) -> npt.NDArray[np.int32]:
    """``np.asarray(listed, dtype=np.int32)``, converted and then freed ``_SLICE`` items at a
    time, so no step holds the GIL for long; ``listed`` ends empty."""
    found = np.empty((len(listed), *np.shape(listed[0])) if listed else 0, dtype=np.int32)
    for k in range(0, len(listed), _SLICE):
        found[k : k + _SLICE] = listed[k : k + _SLICE]
    while listed:
        del listed[-_SLICE:]
    return found


def _from_offsets(text: str, enc: Encoding) -> tuple[IdArray, OffsetArray]:
    """Ids and byte ends of ``text`` from the engine's character offsets."""
    ids = int32_array(enc.ids)
    if not len(ids):
        return ids, np.zeros(0, dtype=np.int32)
    offsets = int32_array(enc.offsets)
    table = None if text.isascii() else char_to_byte_offsets(text)
    starts, ends = (offsets if table is None else table[offsets]).T
    # Characters that normalization composed into the one before (a combining mark) or
    # dropped get no offset of their own: they belong to the token before them, so the
    # tokens' extents cover the text, each ending where the next begins (or the text ends).
    ends = np.maximum(ends, np.append(starts[1:], len(text.encode("utf-8"))))
    return ids, np.ascontiguousarray(ends, dtype=np.int32)


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


def _byte_level_lengths(
    tokenizer: Tokenizer, serialized: str
) -> tuple[IdArray | None, NormalForm | None]:
    """(UTF-8 length of every token id, the normal form the normalizer applies) for a
    byte-level BPE tokenizer (``serialized``: its JSON); (None, None) for any other kind."""
    data = json.loads(serialized)
    form, problem = normalizer_kind(data.get("normalizer"))
    model, decoder = data.get("model") or {}, data.get("decoder") or {}
    if (
        problem is not None
        or model.get("type") != "BPE"
        or model.get("byte_fallback")
        or decoder.get("type") != "ByteLevel"
    ):
        return None, None
    to_byte = {c: b for b, c in bytes_to_unicode().items()}
    vocab = tokenizer.get_vocab(with_added_tokens=False)
    added = tokenizer.get_added_tokens_decoder()
    lengths = np.zeros(max([*vocab.values(), *added], default=-1) + 1, dtype=np.int32)
    for token, i in vocab.items():
        if any(c not in to_byte for c in token):
            return None, None
        lengths[i] = len(token)  # one character per byte
    for i, added_token in added.items():
        lengths[i] = len(added_token.content.encode("utf-8"))
    return lengths, form


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
