"""GPT-2's byte -> character table: how byte-level BPE files spell bytes.  Tokenization, the
converters and the kernels all read it."""

from __future__ import annotations


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table used by HF byte-level BPE."""
    table = {b: chr(b) for b in [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table
