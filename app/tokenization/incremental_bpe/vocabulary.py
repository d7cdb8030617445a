"""A BPE model read from tokenizer.json and made *proper*, in bytes.

The incremental algorithm needs a proper vocabulary: every token is produced by exactly one merge
rule, and encoding a token's own bytes gives that token back (it is *reachable*).  Real files are
not proper: the SentencePiece converter writes one rule per split of a piece (``▁t he`` and
``▁th e``), added tokens sit in the vocabulary without a rule, and some merged strings never
survive their own encoding.  Normalization keeps each reachable token with its *canonical* rule
(the last merge of its own encoding); every other rule provably never fires, because inside a
token's span the merges run exactly as they do on the token alone.

Everything here is in bytes.  Byte-level files map their characters back to bytes.  Character-
level files (SentencePiece with byte fallback) treat each UTF-8 byte as an atom; a multi-byte
character of the vocabulary is built from its bytes by *virtual* rules ranked before every real
one, and bytes of characters outside the vocabulary come out as their ``<0xXX>`` tokens.

Internal token numbering: 0..255 are the byte atoms; non-atomic tokens follow in rule order, so
a non-atomic token's number is its merge priority (smaller merges first).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.byte_level import bytes_to_unicode

ATOMS = 256


class VocabularyError(ValueError):
    """The file is not a BPE model, or its vocabulary cannot be made proper."""


@dataclass(frozen=True)
class ProperVocabulary:
    """Non-atomic token ``t`` (``t >= ATOMS``) is the merge of ``pre[t]`` and ``suc[t]``.

    ``pieces[t]`` are the bytes of internal token ``t``; ``outputs[t]`` the model's ids it stands
    for (one id, or the byte-fallback ids of a virtual partial character).
    """

    pieces: list[bytes]
    pre: list[int]
    suc: list[int]
    outputs: list[tuple[int, ...]]


def read_model(path: Path) -> dict[str, Any]:
    """The ``model`` object of a tokenizer.json, checked to be a plain BPE.

    The key ``byte_level`` is added: whether the file spells bytes as GPT-2 characters (its
    decoder is ByteLevel).
    """
    document = json.loads(path.read_text(encoding="utf-8"))
    model: dict[str, Any] = document["model"]
    if model.get("type") != "BPE":
        raise VocabularyError(f"{path}: model type {model.get('type')!r}, not BPE")
    for option in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
        if model.get(option):
            raise VocabularyError(f"{path}: BPE option {option}={model[option]!r} unsupported")
    decoder = document.get("decoder") or {}
    parts = decoder.get("decoders", [decoder]) if decoder.get("type") == "Sequence" else [decoder]
    return {**model, "byte_level": any(part.get("type") == "ByteLevel" for part in parts)}


def split_merges(model: dict[str, Any]) -> list[tuple[str, str]]:
    """Merges as pairs, whichever of the two tokenizer.json spellings the file uses."""
    pairs: list[tuple[str, str]] = []
    for merge in model["merges"]:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        pairs.append((left, right))
    return pairs


class _Encoder:
    """Token string -> bytes for the file's spelling."""

    def __init__(self, byte_level: bool) -> None:
        self._table = {c: b for b, c in bytes_to_unicode().items()} if byte_level else None

    def __call__(self, token: str) -> bytes:
        if self._table is None:
            return token.encode("utf-8")
        return bytes(self._table[ch] for ch in token)


def encode_piece(
    piece: bytes, rules: dict[tuple[int, int], tuple[int, int]]
) -> tuple[list[int], tuple[int, int] | None]:
    """Plain BPE of one short piece over byte atoms (rank order, leftmost first).

    Returns the final ids and the pair of the last merge applied (None when nothing merged).
    """
    ids = list(piece)
    last: tuple[int, int] | None = None
    while len(ids) > 1:
        best: tuple[int, int, int] | None = None
        for i in range(len(ids) - 1):
            hit = rules.get((ids[i], ids[i + 1]))
            if hit is not None and (best is None or hit[0] < best[0]):
                best = (hit[0], i, hit[1])
        if best is None:
            break
        _, i, merged = best
        last = (ids[i], ids[i + 1])
        ids[i : i + 2] = [merged]
    return ids, last


def _atom_outputs(model: dict[str, Any], encode: _Encoder) -> list[tuple[int, ...]]:
    """The ids of each byte alone: its token, its ``<0xXX>`` fallback, the unknown token, or
    none (byte-level files: the reference then drops the byte, so the engine's caller deletes it
    first).  Character files need a fallback or a token for every byte: the reference treats an
    unknown character as one unit, which bytes cannot express."""
    vocab: dict[str, int] = model["vocab"]
    by_bytes: dict[int, int] = {}
    for token, token_id in vocab.items():
        piece = _try(encode, token)
        if piece is not None and len(piece) == 1:
            by_bytes[piece[0]] = token_id
    unknown = vocab.get(model.get("unk_token") or "")
    outputs: list[tuple[int, ...]] = []
    for b in range(ATOMS):
        found = by_bytes.get(b, vocab.get(f"<0x{b:02X}>", unknown))
        if found is not None and (found != unknown or model["byte_level"] or b < 0x80):
            outputs.append((found,))
        elif found is None and model["byte_level"]:
            outputs.append(())
        else:
            raise VocabularyError(f"byte 0x{b:02X} has no token and no byte fallback")
        if found is not None and found == unknown and model.get("fuse_unk"):
            raise VocabularyError(f"byte 0x{b:02X} would be a fused unknown token: unsupported")
    return outputs


def normalize(model: dict[str, Any]) -> ProperVocabulary:
    """Keep reachable tokens with their canonical rules; renumber them by merge priority."""
    vocab: dict[str, int] = model["vocab"]
    byte_level = bool(model["byte_level"])
    encode = _Encoder(byte_level)
    atom_outputs = _atom_outputs(model, encode)

    # Working ids: bytes of every string that takes part (atoms, virtual prefixes, merged tokens).
    piece_id: dict[bytes, int] = {bytes([b]): b for b in range(ATOMS)}
    pieces: list[bytes] = [bytes([b]) for b in range(ATOMS)]
    rules: dict[tuple[int, int], tuple[int, int]] = {}  # (left, right) -> (rank, merged)

    def intern(piece: bytes) -> int:
        if piece not in piece_id:
            piece_id[piece] = len(pieces)
            pieces.append(piece)
        return piece_id[piece]

    rank = iter(range(1 << 62))

    def add_rule(left: bytes, right: bytes) -> None:
        key = (intern(left), intern(right))
        rules[key] = (next(rank), intern(left + right))  # a repeated pair: the later rank wins

    if not byte_level:  # characters of the vocabulary, byte by byte, before every real merge
        for token in vocab:
            for ch in token if len(token) == 1 else ():
                raw = ch.encode("utf-8")
                for end in range(2, len(raw) + 1):
                    if (piece_id.get(raw[: end - 1]), raw[end - 1]) not in rules:
                        add_rule(raw[: end - 1], raw[end - 1 : end])
    for left, right in split_merges(model):
        if left + right not in vocab or left not in vocab or right not in vocab:
            raise VocabularyError(f"merge {left!r} + {right!r} uses a string outside the vocab")
        left_piece, right_piece = _try(encode, left), _try(encode, right)
        if left_piece is None or right_piece is None:
            raise VocabularyError(f"merge {left!r} + {right!r} is not spelled in bytes")
        add_rule(left_piece, right_piece)

    outputs = dict(enumerate(atom_outputs))
    for token, token_id in vocab.items():
        if (piece := _try(encode, token)) in piece_id:
            outputs[piece_id[piece]] = (token_id,)
    canonical: dict[int, tuple[int, int]] = {}  # merged -> (left, right) of its last merge
    for merged in {merged for _, merged in rules.values()}:
        ids, last = encode_piece(pieces[merged], rules)
        if ids == [merged] and last is not None:
            canonical[merged] = last
    ranked = sorted(canonical, key=lambda t: rules[canonical[t]][0])
    return _renumber(pieces, ranked, canonical, outputs)


def _try(encode: _Encoder, token: str) -> bytes | None:
    try:
        return encode(token)
    except KeyError:
        return None


def _renumber(
    pieces: list[bytes],
    ranked: list[int],
    canonical: dict[int, tuple[int, int]],
    outputs: dict[int, tuple[int, ...]],
) -> ProperVocabulary:
    """Internal numbers in rule order; a rule must come after the rules of both its parts."""
    proper = ProperVocabulary(
        pieces=pieces[:ATOMS],
        pre=[-1] * ATOMS,
        suc=[-1] * ATOMS,
        outputs=[outputs[b] for b in range(ATOMS)],
    )
    new_id = {b: b for b in range(ATOMS)}
    for t in ranked:
        left, right = canonical[t]
        if left not in new_id or right not in new_id:
            raise VocabularyError(
                f"cannot be made proper: token {pieces[t]!r} merges {pieces[left]!r} + "
                f"{pieces[right]!r}, which are not both tokens ranked before it"
            )
        new_id[t] = len(proper.pieces)
        proper.pieces.append(pieces[t])
        proper.pre.append(new_id[left])
        proper.suc.append(new_id[right])
        # a virtual partial character stands for the byte-fallback ids of its bytes
        proper.outputs.append(outputs.get(t) or tuple(i for b in pieces[t] for i in outputs[b]))
    return proper
