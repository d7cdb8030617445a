"""Read a tokenizer.json and decide which proven cut rules, if any, apply to it.

Exact repair rests on one question: at which positions can a text be cut so that encoding the
two sides separately gives the same ids as encoding the whole (a *stable* cut)?  The answer
depends on the normalizer, the pre-tokenizer and the added tokens.  This module recognises the
pre-tokenizer families whose rules have been argued (see ``boundaries.py``) and proven by
differential tests, and Gemma's SentencePiece-style files (``spaces_replaced``), whose one rule
rests on the vocabulary and is checked on it here; anything else is reported with the reason
and takes the full path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.errors import TokenizerSpecError

# Pre-tokenizer regexes exactly as they appear in real tokenizer.json files (cl100k is the
# non-possessive form Llama-3 ships, which our tiktoken conversion writes too).
_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
CL100K_PATTERN = (
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = CL100K_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
# Mistral's Tekken: o200k's two word alternatives without contractions, then single digits.
_O200K_WORDS = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
)
_O200K_REST = (r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+")
O200K_PATTERN = "|".join(
    [*(word + _CONTRACTIONS + "?" for word in _O200K_WORDS), r"\p{N}{1,3}", *_O200K_REST]
)
TEKKEN_PATTERN = "|".join([*_O200K_WORDS, r"\p{N}", *_O200K_REST])
# Qwen3.5 / 3.6: Qwen2's with combining marks joining letters (and leaving punctuation).
QWEN35_PATTERN = (
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Kimi K2: Han runs first, then o200k's words without Han, o200k's digits, cl100k's punctuation.
_NOT_HAN = r"&&[^\p{Han}]]"
KIMI_PATTERN = "|".join(
    [
        r"[\p{Han}]+",
        *(
            word.replace(r"\p{M}]", r"\p{M}" + _NOT_HAN) + _CONTRACTIONS + "?"
            for word in _O200K_WORDS
        ),
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n]*",
        *_O200K_REST[1:],
    ]
)
DEEPSEEK_V3_PATTERNS = (
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
    "|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*"
    "|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
)

_SPLIT_FAMILIES: Mapping[tuple[str, ...], str] = {
    (CL100K_PATTERN,): "cl100k",
    (QWEN2_PATTERN,): "qwen2",
    (O200K_PATTERN,): "o200k",
    (TEKKEN_PATTERN,): "tekken",
    (QWEN35_PATTERN,): "qwen35",
    (KIMI_PATTERN,): "kimi",
    DEEPSEEK_V3_PATTERNS: "deepseek_v3",
}

# Families whose normalizer may be one of these (identity on ASCII, which is all a cut reads).
NormalForm = Literal["NFC", "NFKC"]
"""The normalizers with proven cut rules: they leave ASCII alone."""


@dataclass(frozen=True, slots=True)
class AddedToken:
    """An added token as the added-token split sees it (matched before normalization or after)."""

    content: str
    lstrip: bool
    rstrip: bool
    single_word: bool
    normalized: bool

    @property
    def strips(self) -> bool:
        """True when its match absorbs or depends on neighbouring characters."""
        return self.lstrip or self.rstrip or self.single_word


@dataclass(frozen=True, slots=True)
class TokenizerSpec:
    """What toksplice needs to know about a tokenizer.json.

    ``family`` names the pre-tokenizer family with a proven rule set, or is None; then
    ``unproven_reason`` says why and every encode takes the full path.
    """

    family: str | None
    unproven_reason: str | None
    normalizer: str | None
    added_tokens: tuple[AddedToken, ...]

    @property
    def proven(self) -> bool:
        return self.family is not None


def load_spec(path: str | Path) -> TokenizerSpec:
    """Parse ``path`` (a tokenizer.json) into a spec; raises TokenizerSpecError if unreadable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TokenizerSpecError(f"cannot read tokenizer file {path}: {exc}") from exc
    if not isinstance(data, dict) or "model" not in data:
        raise TokenizerSpecError(f"{path} is not a tokenizer.json (no 'model')")
    return spec_from_json(data)


def spec_from_json(data: Mapping[str, Any]) -> TokenizerSpec:
    added = tuple(
        AddedToken(
            content=str(tok["content"]),
            lstrip=bool(tok.get("lstrip", False)),
            rstrip=bool(tok.get("rstrip", False)),
            single_word=bool(tok.get("single_word", False)),
            normalized=bool(tok.get("normalized", False)),
        )
        for tok in data.get("added_tokens") or []
    )
    family: str | None = None
    normalizer: str | None
    if data.get("normalizer") == SPACE_REPLACE:
        normalizer, problem = "Replace", _model_problem(data)
        if problem is None:
            family, problem = _spaces_replaced(data, added)
    else:
        normalizer, problem = normalizer_kind(data.get("normalizer"))
        problem = problem or _model_problem(data)
        if problem is None:
            family, problem = _family(data.get("pre_tokenizer"))
    if problem is not None:
        family = None
    return TokenizerSpec(
        family=family, unproven_reason=problem, normalizer=normalizer, added_tokens=added
    )


SPACE_MARK = "\u2581"
SPACE_REPLACE = {"type": "Replace", "pattern": {"String": " "}, "content": SPACE_MARK}
"""Gemma's normalizer: every space becomes "▁", and nothing else changes."""
_SPACE_SPLIT = {
    "type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False,
}  # fmt: skip
SPACE_CUT_AFTER = frozenset(map(chr, range(0x21, 0x7F))) - {">"}
"""The characters after which a space is a stable cut in the ``spaces_replaced`` family (the
rule ``boundaries`` applies), provided no vocabulary token joins one of them to a "▁"."""


def _spaces_replaced(
    data: Mapping[str, Any], added: tuple[AddedToken, ...]
) -> tuple[str | None, str | None]:
    """Gemma's SentencePiece-style BPE: after the space ``Replace`` each stretch between added
    tokens is merged whole (its ``Split`` on " " finds no space left to split at).  Its cut
    rule holds when no token of the vocabulary (every merge makes one) holds "▁" right after a
    character of ``SPACE_CUT_AFTER``, and each of those is a token (so no byte fallback or
    unknown token is involved)."""
    pre = data.get("pre_tokenizer")
    if pre is not None and pre != _SPACE_SPLIT:
        return None, f"pre-tokenizer {pre.get('type')} after the space Replace has no cut rules"
    model = data["model"]
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return None, "BPE with subword prefixes or suffixes has no proven cut rules"
    if any(t.normalized for t in added):
        return None, "added tokens matched after the space Replace have no proven cut rules"
    vocab: Mapping[str, int] = model.get("vocab") or {}
    missing = sorted(c for c in (*SPACE_CUT_AFTER, SPACE_MARK) if c not in vocab)
    if missing:
        return None, f"the vocabulary has no token {missing[0]!r}"
    for token in vocab:
        at = token.find(SPACE_MARK, 1)
        while at > 0:
            if token[at - 1] in SPACE_CUT_AFTER:
                return None, f"the vocabulary's {token!r} joins {token[at - 1]!r} to a space"
            at = token.find(SPACE_MARK, at + 1)
    return "spaces_replaced", None


def normalizer_kind(node: Any) -> tuple[NormalForm | None, str | None]:
    """Return (kind, problem): kind is None, "NFC" or "NFKC"; problem explains a refusal."""
    if node is None:
        return None, None
    kind = node.get("type")
    if kind == "Sequence":
        inner = node.get("normalizers") or []
        if not inner:
            return None, None
        if len(inner) == 1:
            return normalizer_kind(inner[0])
        return None, f"normalizer Sequence of {len(inner)} steps has no proven cut rules"
    if kind == "NFC" or kind == "NFKC":
        return kind, None
    return None, f"normalizer {kind} has no proven cut rules"


def _model_problem(data: Mapping[str, Any]) -> str | None:
    model = data["model"]
    if model.get("type") != "BPE":
        return f"model type {model.get('type')} is not BPE"
    if model.get("dropout") not in (None, 0, 0.0):
        return "BPE dropout makes encoding non-deterministic"
    if data.get("truncation") is not None or data.get("padding") is not None:
        return "truncation or padding is configured in the tokenizer file"
    return None


def _family(node: Any) -> tuple[str | None, str | None]:
    if node is None:
        return None, "no pre-tokenizer: the whole text is one piece (see incremental BPE)"
    kind = node.get("type")
    if kind == "ByteLevel":
        return _gpt2_byte_level(node)
    if kind != "Sequence":
        return None, f"pre-tokenizer {kind} has no proven cut rules"
    steps = list(node.get("pretokenizers") or [])
    if len(steps) > 1 and drops_single_characters(steps[-1]):
        # Dropping characters wherever they stand only splits pieces further, the same way in
        # any context: every cut stable without it stays stable (GGUF vocabularies that lack
        # some byte tokens, where llama.cpp drops those bytes).
        steps = steps[:-1]
    if not steps or steps[-1].get("type") != "ByteLevel":
        return None, "pre-tokenizer Sequence does not end in ByteLevel"
    last = steps[-1]
    if len(steps) == 2 and steps[0].get("type") == "Digits":
        if not steps[0].get("individual_digits", False):
            return None, "Digits(individual_digits=false) has no proven cut rules"
        family, problem = _gpt2_byte_level(last)
        return (None, problem) if problem else ("gpt2_digits", None)
    if last.get("add_prefix_space", False):
        return None, "ByteLevel add_prefix_space changes the start of every fragment"
    if last.get("use_regex", True):
        return None, "ByteLevel with its own regex after a Split has no proven cut rules"
    patterns: list[str] = []
    for step in steps[:-1]:
        if step.get("type") != "Split" or step.get("behavior") != "Isolated" or step.get("invert"):
            return None, f"pre-tokenizer step {step.get('type')} has no proven cut rules"
        pattern = step.get("pattern", {}).get("Regex")
        if pattern is None:
            return None, "Split on a plain string has no proven cut rules"
        patterns.append(str(pattern))
    family = _SPLIT_FAMILIES.get(tuple(patterns))
    if family is None:
        return None, "Split regex is not one of the proven families"
    return family, None


def drops_single_characters(step: Mapping[str, Any]) -> bool:
    """A ``Split`` that removes every character of one bracketed character class."""
    pattern = step.get("pattern", {}).get("Regex")
    return (
        step.get("type") == "Split"
        and step.get("behavior") == "Removed"
        and not step.get("invert")
        and isinstance(pattern, str)
        and re.fullmatch(r"\[[^\[\]\\^-]+\]", pattern) is not None
    )


def _gpt2_byte_level(node: Mapping[str, Any]) -> tuple[str | None, str | None]:
    if node.get("add_prefix_space", False):
        return None, "ByteLevel add_prefix_space changes the start of every fragment"
    if not node.get("use_regex", True):
        return None, "ByteLevel without a regex: the whole text is one piece"
    return "gpt2", None
