"""The binary form of a ``SessionState`` in a shared store: compact, versioned, self-checking.

    offset  size  field
    0       4     magic b"TKS1"
    4       1     format version (1)
    5       1     flags: bit 0 = ends stored as uint16 token lengths (else int32 ends)
    6       2     reserved (0)
    8       4     n_tokens (uint32, little-endian)
    12      4     text bytes (uint32)
    16      8     tokenizer fingerprint (the first 8 bytes of blake2b of tokenizer.json)
    24      16    blake2b-128 of bytes 0..24 and of everything after byte 40
    40      ...   text (UTF-8) | ids (int32 LE) | ends (uint16 lengths or int32 LE)

The text is stored in full, not as a digest: repair needs the stored bytes themselves (to
find the common prefix, the resynchronisation after an edit and stable cuts on both sides),
and the diff compares every byte it reuses with the new text.  Token lengths fit 16 bits in
practice, which halves the offsets; a state with a longer token keeps int32 ends.

``decode`` returns None for anything it cannot fully trust: wrong magic or version, another
tokenizer's entry, a length that does not add up (truncation), a digest mismatch (corruption),
or offsets that do not rise monotonically to the text's length.  Such an entry is a miss,
never a base for repair.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from app.tokenization.state import SessionState

MAGIC = b"TKS1"
FORMAT = 1
_SHORT_ENDS = 1
_HEAD = struct.Struct("<4sBBHII8s")
_DIGEST = 16
HEADER_BYTES = _HEAD.size + _DIGEST
_U16_MAX = 0xFFFF


def fingerprint(tokenizer_json: bytes) -> bytes:
    """8 bytes naming a tokenizer: entries written under another tokenizer are misses."""
    return hashlib.blake2b(tokenizer_json, digest_size=8).digest()


def encode(state: SessionState, tokenizer: bytes) -> bytes:
    n = len(state.ids)
    lengths = np.diff(state.ends, prepend=np.int32(0)) if n else np.zeros(0, np.int32)
    short = n == 0 or int(lengths.max()) <= _U16_MAX
    ends = lengths.astype("<u2") if short else state.ends.astype("<i4", copy=False)
    head = _HEAD.pack(MAGIC, FORMAT, _SHORT_ENDS if short else 0, 0, n, len(state.text), tokenizer)
    body = (state.text, state.ids.astype("<i4", copy=False).tobytes(), ends.tobytes())
    return b"".join((head, checksum(head, body), *body))


def decode(entry: bytes, tokenizer: bytes) -> SessionState | None:
    """The state in ``entry``, or None when it is not exactly what ``encode`` wrote."""
    if len(entry) < HEADER_BYTES:
        return None
    magic, version, flags, _, n, size, owner = _HEAD.unpack_from(entry)
    if magic != MAGIC or version != FORMAT or owner != tokenizer or flags & ~_SHORT_ENDS:
        return None
    short = bool(flags & _SHORT_ENDS)
    ids_at = HEADER_BYTES + size
    ends_at = ids_at + 4 * n
    if len(entry) != ends_at + (2 if short else 4) * n:
        return None
    view = memoryview(entry)
    body = (view[HEADER_BYTES:ids_at], view[ids_at:ends_at], view[ends_at:])
    if checksum(view[: _HEAD.size], body) != entry[_HEAD.size : HEADER_BYTES]:
        return None
    ids = np.frombuffer(entry, dtype="<i4", count=n, offset=ids_at).astype(np.int32)
    if short:
        lengths = np.frombuffer(entry, dtype="<u2", count=n, offset=ends_at)
        ends = np.cumsum(lengths, dtype=np.int64).astype(np.int32)
    else:
        ends = np.frombuffer(entry, dtype="<i4", count=n, offset=ends_at).astype(np.int32)
        if n and (ends[0] < 0 or not (np.diff(ends) >= 0).all()):
            return None
    if (int(ends[-1]) if n else 0) != size or (n and int(ids.min()) < 0):
        return None
    ids.flags.writeable = False
    ends.flags.writeable = False
    return SessionState(text=bytes(body[0]), ids=ids, ends=ends)


def digest(entry: bytes) -> bytes:
    """The entry's digest: the chain digest of its state (trusted once ``decode`` accepted it)."""
    return entry[_HEAD.size : HEADER_BYTES]


def checksum(head: bytes | memoryview, body: tuple[bytes | memoryview, ...]) -> bytes:
    """blake2b-128 of ``head`` and then each part of ``body``."""
    h = hashlib.blake2b(head, digest_size=_DIGEST)
    for part in body:
        h.update(part)
    return h.digest()
