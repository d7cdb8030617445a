"""The reference the incremental BPE is held to: HF tokenizers' own BPE model from a
tokenizer.json, with no normalizer and no pre-tokenizer, over bytes.

``ignore_merges`` is turned off (it makes a whole piece that is a vocabulary entry one token,
which is a pre-split rule, not BPE).  ``pieces`` splits a text with the file's own pre-tokenizer
for the per-piece comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer, models

from app.byte_level import bytes_to_unicode
from app.tokenization.incremental_bpe.vocabulary import read_model, split_merges


def reference_bpe(path: Path) -> Callable[[bytes], list[int]]:
    model = read_model(path)
    bpe = models.BPE(
        vocab=model["vocab"],
        merges=split_merges(model),
        unk_token=model.get("unk_token"),
        fuse_unk=bool(model.get("fuse_unk")),
        byte_fallback=bool(model.get("byte_fallback")),
        ignore_merges=False,
    )
    tokenizer = Tokenizer(bpe)
    if model["byte_level"]:
        spell = str.maketrans(dict(bytes_to_unicode().items()))  # via latin-1: byte -> char

        def encode(data: bytes) -> list[int]:
            return list(tokenizer.encode(data.decode("latin-1").translate(spell)).ids)

        return encode
    return lambda data: list(tokenizer.encode(data.decode("utf-8")).ids)


def pre_tokenizer_pieces(path: Path) -> Callable[[str], list[bytes]]:
    """The file's normalizer and pre-tokenizer: a text's pieces, as bytes."""
    tokenizer = Tokenizer.from_file(str(path))
    byte_level = read_model(path)["byte_level"]
    unspell = {c: b for b, c in bytes_to_unicode().items()}

    def split(text: str) -> list[bytes]:
        if tokenizer.normalizer is not None:
            text = tokenizer.normalizer.normalize_str(text)
        pieces = [piece for piece, _ in tokenizer.pre_tokenizer.pre_tokenize_str(text)]
        if byte_level:
            return [bytes(unspell[ch] for ch in piece) for piece in pieces]
        return [piece.encode("utf-8") for piece in pieces]

    return split
