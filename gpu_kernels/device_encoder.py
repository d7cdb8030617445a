"""The GPU path: the twin's pipeline with its predicate and BPE stages run by the kernels.

The added-token split, the normalizer, the class lookup, the distinct-piece table, the
whole-word lookup and the final gather stay on the host for now (see the README section).
"""

from __future__ import annotations

import json

from tokenizers import Tokenizer

from app.tokenization.spec import spec_from_json
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.cupy_bpe import merge_on_device
from gpu_kernels.cupy_predicate import cl100k_starts_on_device
from gpu_kernels.piece_starts import DIGITS_PER_PIECE
from gpu_kernels.twin import TwinEncoder, UnsupportedTokenizer


def device_encoder(
    tokenizer: Tokenizer, *, classes: ClassTable | None = None, cache_bytes: int = 64 << 20
) -> TwinEncoder:
    """An encoder for a cl100k-family tokenizer whose kernels run on the GPU (CuPy needed)."""
    family = spec_from_json(json.loads(tokenizer.to_str())).family
    if family is None or family not in DIGITS_PER_PIECE:
        raise UnsupportedTokenizer(f"no device predicate for family {family!r}")
    per_piece = DIGITS_PER_PIECE[family]
    return TwinEncoder(
        tokenizer,
        classes=classes,
        cache_bytes=cache_bytes,
        predicate=lambda c, f, _: cl100k_starts_on_device(c, f, digits_per_piece=per_piece),
        merge=merge_on_device,
    )
