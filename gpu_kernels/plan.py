"""What both cold-start encoders (the twin and the device) take from a tokenizer, checked once."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from app.byte_level import bytes_to_unicode
from app.tokenizer_spec import SPACE_MARK, AddedToken, drops_single_characters, spec_from_json
from gpu_kernels.byte_bpe import MergeTable
from gpu_kernels.char_bpe import CharacterMergeTable
from gpu_kernels.char_classes import ClassTable, engine_matches
from gpu_kernels.payload import AddedSplit, Finder
from gpu_kernels.piece_starts import PREDICATES

_STEPS = {"gpt2": 1, "deepseek_v3": 4, "spaces_replaced": 1}
"""Pre-tokenizer steps (ByteLevel last, but Gemma's one Split) of the families that do not
have two."""


class UnsupportedTokenizer(ValueError):
    """The tokenizer is outside what the twin (and so the GPU path) reproduces exactly."""


class EncoderPlan:
    """The pre-tokenizer family, the added-token split, the class table and the merges."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        classes: ClassTable | None = None,
        *,
        families: Collection[str] = tuple(PREDICATES),
        drops: bool = False,
        finder: Finder | None = None,
    ) -> None:
        """``classes`` may be shared: it depends on the engine only, not on the tokenizer.
        ``families``: those the caller covers; ``drops``: whether it removes the bytes of a
        trailing character-removing Split (``dropped``); ``finder``: the added-token search
        (``AddedSplit``)."""
        document: dict[str, Any] = json.loads(tokenizer.to_str())
        if tokenizer.encode_special_tokens:  # special tokens are text then: the rest split
            kept = [t for t in document.get("added_tokens") or [] if not t.get("special")]
            document["added_tokens"] = kept
        spec = spec_from_json(document)
        family = spec.family
        if family is None or family not in families:
            raise UnsupportedTokenizer(
                f"family {family!r} is not covered ({spec.unproven_reason or 'no twin yet'})"
            )
        pre = document.get("pre_tokenizer") or {}
        steps = pre.get("pretokenizers") or ([pre] if pre else [])
        self.dropped = np.zeros(256, dtype=np.uint8)
        """1 for each byte a trailing Split that removes characters takes out (spec accepts
        one: GGUF vocabularies that lack some byte tokens), when ``drops``."""
        if drops and len(steps) == _STEPS.get(family, 2) + 1 and drops_single_characters(steps[-1]):
            self.dropped = _dropped_bytes(steps.pop()["pattern"]["Regex"])
        if len(steps) != _STEPS.get(family, 2):
            raise UnsupportedTokenizer(f"pre-tokenizer of {len(steps)} steps for {family}")
        stripping = [t.content for t in spec.added_tokens if t.strips]
        if stripping:
            raise UnsupportedTokenizer(
                f"{len(stripping)} added tokens strip their neighbours (e.g. {stripping[0]!r})"
            )
        normalizer = document.get("normalizer")
        mixed = two_pass_conflict(spec.added_tokens, identity=_is_identity(normalizer))
        if mixed is not None:
            raise UnsupportedTokenizer(mixed)
        self.family: str = family
        added = {t["content"]: int(t["id"]) for t in document["added_tokens"]}
        # Gemma's Replace(" ", "▁") is applied by the merges' symbols (CharacterMergeTable),
        # and its added tokens all match the raw text (tokenizer_spec checked).
        chars = family == "spaces_replaced"
        self.split = AddedSplit(
            added,
            None if _is_identity(normalizer) or chars else tokenizer.normalizer,
            normalizer,
            finder=finder,
        )
        self.classes = classes or ClassTable()
        try:
            self.merges: MergeTable = (
                CharacterMergeTable(document["model"], SPACE_MARK)
                if chars
                else MergeTable(document["model"])
            )
        except ValueError as exc:
            raise UnsupportedTokenizer(str(exc)) from exc
        if np.any((self.merges.byte_ids < 0) & (self.dropped == 0)):
            raise UnsupportedTokenizer("the vocabulary lacks a byte the pre-tokenizer keeps")


def two_pass_conflict(added: Sequence[AddedToken], *, identity: bool) -> str | None:
    """Why one leftmost-longest pass over all added tokens (``AddedSplit``) may differ from
    HF's two (the non-normalized tokens split off the raw text first, then the normalized ones
    off each stretch left, normalized); None when it cannot.

    With an identity normalizer the stretches are raw text.  If no normalized token holds a
    non-normalized one or ends with a start of one, no match of a normalized token covers the
    start of a non-normalized occurrence: the single pass takes exactly the first pass's
    matches, and between them the second pass's, none of which crosses into the first's.
    (The other way round is harmless: the token that starts first, or the longer, wins in both.)"""
    normalized = [t.content for t in added if t.normalized]
    if not normalized:
        return None
    if not identity:
        return f"{len(normalized)} normalized added tokens under a normalizer"
    raw = [t.content for t in added if not t.normalized]
    ends = {x[i:] for x in normalized for i in range(1, len(x))}
    for y in raw:
        if any(y[:k] in ends for k in range(1, len(y))) or any(y in x for x in normalized):
            return f"added token {y!r} overlaps a normalized one"
    return None


def _dropped_bytes(pattern: str) -> npt.NDArray[np.uint8]:
    """1 for each byte whose byte-level character the engine's ``pattern`` matches."""
    chars = bytes_to_unicode()
    return engine_matches(pattern, "".join(chars[b] for b in range(256))).astype(np.uint8)


def _is_identity(normalizer: Any) -> bool:
    """No normalizer, or an empty sequence of them."""
    return normalizer is None or normalizer == {"type": "Sequence", "normalizers": []}
