"""Convert a SentencePiece BPE model (``tokenizer.model``) into an HF ``tokenizer.json``.

The model file is a protobuf; the few fields needed are read from the wire format directly, so
neither sentencepiece nor protobuf is needed at run time.  SentencePiece BPE merges the
adjacent pair whose concatenation is a piece of highest score (leftmost on ties); as HF merges,
that is one rule per split of each piece, ranked by the piece's score (then by the parts'
ids).  The text normalization of the supported models (identity, whitespace kept, a ``▁``
prefix) is the Llama/Mistral one: ``Prepend("▁")`` then ``Replace(" ", "▁")``.  Control pieces
become special added tokens, user-defined pieces plain added tokens, ``<0xXX>`` pieces the byte
fallback.  ``tests/tokenization/test_sentencepiece_bpe.py`` holds the output to sentencepiece.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.tokenization.bpe_appends import PREPEND_SPACES, SPACE

_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_BPE = 2


class SentencePieceError(ValueError):
    """The file is not a SentencePiece BPE model this converter supports."""


@dataclass
class SentencePieceModel:
    pieces: list[tuple[str, float, int]] = field(default_factory=list)  # piece, score, type
    model_type: int = 1  # proto default: UNIGRAM
    byte_fallback: bool = False
    normalizer: str = ""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True


def _wire(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of one protobuf message."""
    at = 0

    def varint() -> int:
        nonlocal at
        value = shift = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while at < len(data):
        key = varint()
        number, kind = key >> 3, key & 7
        if kind == 0:
            yield number, varint()
        elif kind == 2:
            size = varint()
            yield number, data[at : at + size]
            at += size
        elif kind in (1, 5):
            width = 8 if kind == 1 else 4
            yield number, data[at : at + width]
            at += width
        else:
            raise SentencePieceError(f"unsupported protobuf wire type {kind}")


def read_model(path: Path) -> SentencePieceModel:
    model = SentencePieceModel()
    for number, value in _wire(path.read_bytes()):
        if number == 1 and isinstance(value, bytes):
            piece, score, kind = "", 0.0, _NORMAL
            for sub, item in _wire(value):
                if sub == 1 and isinstance(item, bytes):
                    piece = item.decode("utf-8")
                elif sub == 2 and isinstance(item, bytes):
                    score = struct.unpack("<f", item)[0]
                elif sub == 3 and isinstance(item, int):
                    kind = item
            model.pieces.append((piece, score, kind))
        elif number == 2 and isinstance(value, bytes):
            for sub, item in _wire(value):
                if sub == 3 and isinstance(item, int):
                    model.model_type = item
                elif sub == 35 and isinstance(item, int):
                    model.byte_fallback = bool(item)
        elif number == 3 and isinstance(value, bytes):
            for sub, item in _wire(value):
                if sub == 1 and isinstance(item, bytes):
                    model.normalizer = item.decode("utf-8")
                elif sub == 3 and isinstance(item, int):
                    model.add_dummy_prefix = bool(item)
                elif sub == 4 and isinstance(item, int):
                    model.remove_extra_whitespaces = bool(item)
    return model


def _merges(model: SentencePieceModel) -> list[tuple[str, str]]:
    ids = {piece: i for i, (piece, _, kind) in enumerate(model.pieces) if kind == _NORMAL}
    ranked = []
    for i, (piece, score, kind) in enumerate(model.pieces):
        if kind != _NORMAL:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in ids and right in ids:
                ranked.append((-score, i, ids[left], ids[right], left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def tokenizer_json(path: Path) -> dict[str, Any]:
    """The tokenizer.json document equivalent to the SentencePiece BPE model at ``path``."""
    model = read_model(path)
    if model.model_type != _BPE:
        raise SentencePieceError(f"{path}: model type {model.model_type}, not BPE")
    if model.normalizer not in ("identity", "") or model.remove_extra_whitespaces:
        raise SentencePieceError(
            f"{path}: only the identity normalizer keeping spaces is supported"
        )
    if not model.add_dummy_prefix:
        raise SentencePieceError(f"{path}: models without the '▁' prefix are not supported")
    unknown = next(piece for piece, _, kind in model.pieces if kind == _UNKNOWN)
    added = [
        {"id": i, "content": piece, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": kind == _USER_DEFINED, "special": kind != _USER_DEFINED}
        for i, (piece, _, kind) in enumerate(model.pieces)
        if kind in (_UNKNOWN, _CONTROL, _USER_DEFINED)
    ]  # fmt: skip
    bos = next((i for i, (piece, _, _) in enumerate(model.pieces) if piece == "<s>"), None)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {
            "type": "Sequence",
            "normalizers": PREPEND_SPACES,
        },
        "pre_tokenizer": None,
        "post_processor": None
        if bos is None
        else {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "<s>", "type_id": 1}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]}},
        },
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": unknown,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": model.byte_fallback,
            "ignore_merges": False,
            "vocab": {piece: i for i, (piece, _, _) in enumerate(model.pieces)},
            "merges": [[left, right] for left, right in _merges(model)],
        },
    }


def write_tokenizer_json(model_path: Path, out: Path) -> Path:
    out.write_text(json.dumps(tokenizer_json(model_path), ensure_ascii=False), encoding="utf-8")
    return out
