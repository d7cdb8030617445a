"""Read GGUF metadata and rebuild a Hugging Face ``tokenizer.json`` from it.

The reader follows the GGUF v2/v3 layout: ``"GGUF"``, a uint32 version, uint64 tensor and
key/value counts, then the key/value pairs (uint64-length strings, a uint32 value type, the
value; arrays carry an element type and a uint64 count). It maps the file and stops after the
key/values, so tensor data is never read.

The rebuilt tokenizer encodes like llama.cpp does for the same file: byte-level BPE with the
file's vocab and merges, the pre-tokenizer llama.cpp picks for ``tokenizer.ggml.pre``, and the
control / user-defined tokens as added tokens (control ones special, so that HF's
``encode_special_tokens`` mirrors llama.cpp's ``parse_special=false``).
"""

from __future__ import annotations

import array
import mmap
import struct
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

from app.tokenization.byte_level import bytes_to_unicode

__all__ = [
    "GGUFError",
    "TokenType",
    "read_metadata",
    "tokenizer_config_from_gguf",
    "tokenizer_json_from_gguf",
]

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
# GGUF value type -> struct / array format code; 8 = string and 9 = array are handled apart.
_SCALAR_CODES = ("B", "b", "H", "h", "I", "i", "f", "?", "", "", "Q", "q", "d")
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """A GGUF file is malformed, or holds a tokenizer this module cannot rebuild."""


class TokenType:
    """llama.cpp's ``tokenizer.ggml.token_type`` values."""

    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


class _Cursor:
    """Sequential little- or big-endian reads from a buffer, with bounds checks."""

    def __init__(self, buf: mmap.mmap, order: str) -> None:
        self.buf, self.order, self.pos = buf, order, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise GGUFError(f"truncated at byte {self.pos}: wanted {n} more bytes")
        data = self.buf[self.pos : self.pos + n]
        self.pos += n
        return data

    def scalar(self, code: str) -> Any:
        fmt = self.order + code
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        raw = self.take(self.scalar("Q"))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GGUFError(f"string before byte {self.pos} is not UTF-8: {exc}") from exc

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner, count = self.scalar("I"), self.scalar("Q")
            return self.array(inner, count)
        return self.scalar(_type_code(kind))

    def array(self, kind: int, count: int) -> list[Any]:
        if kind in (_STRING, _ARRAY):
            return [self.value(kind) for _ in range(count)]
        code = _type_code(kind)
        if code == "?":
            return [bool(b) for b in self.take(count)]
        items = array.array(code)
        items.frombytes(self.take(count * items.itemsize))
        if self.order != "<":
            items.byteswap()
        return items.tolist()


def _type_code(kind: int) -> str:
    if 0 <= kind < len(_SCALAR_CODES) and _SCALAR_CODES[kind]:
        return _SCALAR_CODES[kind]
    raise GGUFError(f"unknown GGUF value type {kind}")


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The key/value metadata of the GGUF file at ``path`` (arrays as lists), in file order."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            if buf[:4] != _MAGIC:
                raise GGUFError(f"not a GGUF file (magic {buf[:4]!r})")
            (version,) = struct.unpack_from("<I", buf, 4)
            order = "<" if version & 0xFFFF else ">"  # a big-endian file reads as v << 24
            cursor = _Cursor(buf, order)
            cursor.pos = 4
            version = cursor.scalar("I")
            if version not in _VERSIONS:
                raise GGUFError(f"GGUF version {version} is not supported (2 or 3)")
            cursor.scalar("Q")  # tensor count: the tensors are not read
            count = cursor.scalar("Q")
            meta: dict[str, Any] = {}
            for _ in range(count):
                key = cursor.string()
                meta[key] = cursor.value(cursor.scalar("I"))
            return meta
    except GGUFError as exc:
        raise GGUFError(f"{path}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise GGUFError(f"{path}: cannot read GGUF metadata: {exc}") from exc


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


def _require(meta: dict[str, Any], key: str, kind: type) -> Any:
    value = meta.get(key)
    if not isinstance(value, kind):
        raise GGUFError(f"metadata {key} is missing or not a {kind.__name__}")
    return value


def _token_text(tokens: list[str], meta: dict[str, Any], key: str) -> str | None:
    token_id = meta.get(f"tokenizer.ggml.{key}_token_id")
    return tokens[token_id] if isinstance(token_id, int) and 0 <= token_id < len(tokens) else None


def _build(meta: dict[str, Any]) -> Tokenizer:
    model = meta.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise GGUFError(f"tokenizer.ggml.model {model!r} is not byte-level BPE ('gpt2')")
    tokens: list[str] = _require(meta, "tokenizer.ggml.tokens", list)
    types: list[int] = meta.get("tokenizer.ggml.token_type") or [TokenType.NORMAL] * len(tokens)
    merges: list[str] = _require(meta, "tokenizer.ggml.merges", list)
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
    tokenizer.pre_tokenizer = _pre_tokenizer(_require(meta, "tokenizer.ggml.pre", str), missing)
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
        if meta.get(f"tokenizer.ggml.add_{key}_token") and (text := _token_text(tokens, meta, key))
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


def tokenizer_config_from_gguf(path: str | Path) -> dict[str, Any]:
    """The ``tokenizer_config.json`` fields a GGUF carries: chat template, bos/eos/pad/unk."""
    meta = read_metadata(path)
    tokens: list[str] = _require(meta, "tokenizer.ggml.tokens", list)
    config: dict[str, Any] = {
        "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": bool(meta.get("tokenizer.ggml.add_eos_token", False)),
        "bos_token": _token_text(tokens, meta, "bos"),
        "eos_token": _token_text(tokens, meta, "eos"),
        "pad_token": _token_text(tokens, meta, "padding"),
        "unk_token": _token_text(tokens, meta, "unknown"),
        "chat_template": meta.get("tokenizer.chat_template"),
    }
    arch = meta.get("general.architecture")
    if isinstance(context := meta.get(f"{arch}.context_length"), int):
        config["model_max_length"] = context
    return config
