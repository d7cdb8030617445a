"""What both cold-start encoders (the twin and the device) take from a tokenizer, checked once."""

from __future__ import annotations

import json
from typing import Any

from tokenizers import Tokenizer

from app.tokenization.spec import spec_from_json
from gpu_kernels.byte_bpe import MergeTable
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.payload import AddedSplit
from gpu_kernels.piece_starts import PREDICATES

_STEPS = {"gpt2": 1, "deepseek_v3": 4}
"""Pre-tokenizer steps (ByteLevel last) of the families that do not have two."""


class UnsupportedTokenizer(ValueError):
    """The tokenizer is outside what the twin (and so the GPU path) reproduces exactly."""


class EncoderPlan:
    """The pre-tokenizer family, the added-token split, the class table and the merges."""

    def __init__(self, tokenizer: Tokenizer, classes: ClassTable | None = None) -> None:
        """``classes`` may be shared: it depends on the engine only, not on the tokenizer."""
        document: dict[str, Any] = json.loads(tokenizer.to_str())
        spec = spec_from_json(document)
        family = spec.family
        if family is None or family not in PREDICATES:
            raise UnsupportedTokenizer(
                f"family {family!r} is not covered ({spec.unproven_reason or 'no twin yet'})"
            )
        steps = document["pre_tokenizer"].get("pretokenizers") or [document["pre_tokenizer"]]
        if len(steps) != _STEPS.get(family, 2):
            # spec accepts a trailing character-removing Split (GGUF); the twin does not do it
            raise UnsupportedTokenizer(f"pre-tokenizer of {len(steps)} steps for {family}")
        flagged = [t for t in spec.added_tokens if t.strips or t.normalized]
        if flagged:
            # HF splits the non-normalized tokens off the raw text first, then the normalized
            # ones off what is left; AddedSplit does one pass, and does not strip
            raise UnsupportedTokenizer(
                f"{len(flagged)} added tokens with strip or normalized flags "
                f"(e.g. {flagged[0].content!r})"
            )
        self.family: str = family
        added = {t["content"]: int(t["id"]) for t in document["added_tokens"]}
        self.split = AddedSplit(added, tokenizer.normalizer, document.get("normalizer"))
        self.classes = classes or ClassTable()
        self.merges = MergeTable(document["model"])
