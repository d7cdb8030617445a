"""Rebuild a Hugging Face ``tokenizer.json`` from a GGUF file's metadata (``app.gguf_file``).

The rebuilt tokenizer encodes like llama.cpp does for the same file: byte-level BPE with the
file's vocab and merges, the pre-tokenizer llama.cpp picks for ``tokenizer.ggml.pre``, and the
control / user-defined tokens as added tokens (control ones special, so that HF's
``encode_special_tokens`` mirrors llama.cpp's ``parse_special=false``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

from app.byte_level import bytes_to_unicode
from app.gguf_file import GGUFError, TokenType, read_metadata, required, token_text

__all__ = ["tokenizer_json_from_gguf"]


def _pre_tokenizer(pre: str, missing_bytes: str) -> pre_tokenizers.PreTokenizer:
    """HF's equivalent of llama.cpp's regexes for ``tokenizer.ggml.pre``.

    llama.cpp gives "gpt2" the GPT-2 pattern and "smollm" (like "codeshell", "exaone",
    "minerva") ``\\p{N}`` first, then the GPT-2 pattern: one digit per piece. A byte without a
    token (``missing_bytes``, as byte-level characters) stays a symbol in llama.cpp's BPE, so
    no merge spans it, and is then dropped; HF would drop it first and merge its neighbours,
    so a last step removes those characters and cuts the piece there.
    """
    steps: list[pre_tokenizers.PreTokenizer] = []
    if pre in ("smollm", "codeshell", "exaone", "minerva"):
        steps.append(pre_tokenizers.Digits(individual_digits=True))
    elif pre != "gpt2":
        raise GGUFError(f"tokenizer.ggml.pre {pre!r} has no known HF pre-tokenizer here")
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    if missing_bytes:
        escaped = "".join("\\" + c if c in "[]\\^-" else c for c in missing_bytes)
        steps.append(pre_tokenizers.Split(Regex(f"[{escaped}]"), behavior="removed"))
    return steps[0] if len(steps) == 1 else pre_tokenizers.Sequence(steps)


def _build(meta: dict[str, Any]) -> Tokenizer:
    model = meta.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise GGUFError(f"tokenizer.ggml.model {model!r} is not byte-level BPE ('gpt2')")
    tokens: list[str] = required(meta, "tokenizer.ggml.tokens", list)
    types: list[int] = meta.get("tokenizer.ggml.token_type") or [TokenType.NORMAL] * len(tokens)
    merges: list[str] = required(meta, "tokenizer.ggml.merges", list)
    if len(types) != len(tokens):
        raise GGUFError(f"{len(types)} token types for {len(tokens)} tokens")
    vocab = {text: i for i, text in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise GGUFError("tokenizer.ggml.tokens holds duplicate tokens")
    pairs: list[tuple[str, str]] = []
    for merge in merges:
        left, sep, right = merge.partition(" ")
        if not sep or not left or not right:
            raise GGUFError(f"bad merge {merge!r}")
        pairs.append((left, right))

    tokenizer = Tokenizer(models.BPE(vocab, pairs))
    missing = "".join(c for c in bytes_to_unicode().values() if c not in vocab)
    if any(c in merge for merge in merges for c in missing):
        raise GGUFError("a merge spans a byte that has no token: llama.cpp's BPE differs from HF's")
    tokenizer.pre_tokenizer = _pre_tokenizer(required(meta, "tokenizer.ggml.pre", str), missing)
    tokenizer.decoder = decoders.ByteLevel()
    added = [
        AddedToken(text, special=kind != TokenType.USER_DEFINED, normalized=False)
        for text, kind in zip(tokens, types, strict=True)
        if kind in (TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN)
    ]
    tokenizer.add_tokens(added)
    for token in added:
        if tokenizer.token_to_id(token.content) != vocab[token.content]:
            raise GGUFError(f"added token {token.content!r} did not keep its id")
    ends = {
        key: text
        for key in ("bos", "eos")
        if meta.get(f"tokenizer.ggml.add_{key}_token") and (text := token_text(tokens, meta, key))
    }
    if ends:
        single = [ends.get("bos"), "$A", ends.get("eos")]
        tokenizer.post_processor = processors.TemplateProcessing(
            single=" ".join(t for t in single if t),
            special_tokens=[(t, vocab[t]) for t in ends.values()],
        )
    return tokenizer


def tokenizer_json_from_gguf(path: str | Path) -> str:
    """A ``tokenizer.json`` (as text) that encodes like llama.cpp does with this GGUF."""
    return str(_build(read_metadata(path)).to_str(pretty=False))
