"""Read a GGUF file's key/value metadata, and the ``tokenizer_config.json`` fields it carries.

The reader follows the GGUF v2/v3 layout: ``"GGUF"``, a uint32 version, uint64 tensor and
key/value counts, then the key/value pairs (uint64-length strings, a uint32 value type, the
value; arrays carry an element type and a uint64 count). It maps the file and stops after the
key/values, so tensor data is never read.  Templates (``app.rendering``) and the tokenizer
rebuild (``app.tokenization.gguf``) both read it.
"""

from __future__ import annotations

import array
import mmap
import struct
from pathlib import Path
from typing import Any

__all__ = [
    "GGUFError",
    "TokenType",
    "read_metadata",
    "required",
    "token_text",
    "tokenizer_config_from_gguf",
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


def required(meta: dict[str, Any], key: str, kind: type) -> Any:
    value = meta.get(key)
    if not isinstance(value, kind):
        raise GGUFError(f"metadata {key} is missing or not a {kind.__name__}")
    return value


def token_text(tokens: list[str], meta: dict[str, Any], key: str) -> str | None:
    token_id = meta.get(f"tokenizer.ggml.{key}_token_id")
    return tokens[token_id] if isinstance(token_id, int) and 0 <= token_id < len(tokens) else None


def tokenizer_config_from_gguf(path: str | Path) -> dict[str, Any]:
    """The ``tokenizer_config.json`` fields a GGUF carries: chat template, bos/eos/pad/unk."""
    meta = read_metadata(path)
    tokens: list[str] = required(meta, "tokenizer.ggml.tokens", list)
    config: dict[str, Any] = {
        "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": bool(meta.get("tokenizer.ggml.add_eos_token", False)),
        "bos_token": token_text(tokens, meta, "bos"),
        "eos_token": token_text(tokens, meta, "eos"),
        "pad_token": token_text(tokens, meta, "padding"),
        "unk_token": token_text(tokens, meta, "unknown"),
        "chat_template": meta.get("tokenizer.chat_template"),
    }
    arch = meta.get("general.architecture")
    if isinstance(context := meta.get(f"{arch}.context_length"), int):
        config["model_max_length"] = context
    return config
