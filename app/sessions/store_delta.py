"""Delta records: a stored state written as stretches of its parent's tokens and new tokens.

A continuation call's state repeats almost all of the previous one's tokens, so a shared store
need not receive the whole state every call: a base entry (``store_entry``) followed by delta
records, each applying to the state the chain held before it.

    offset  size  field
    0       4     magic b"TKD1"
    4       16    parent: the chain digest of the state this record applies to
    20      4     number of segments (uint32, little-endian)
    24      16    this state's chain digest: blake2b-128 of bytes 0..24 and everything after 40
    40      12/s  segments (3 x uint32): (0, a, b) copies the parent's tokens a..b;
                  (1, n, size) inserts the next n new tokens, which cover size text bytes
    ...           new tokens' text (UTF-8) | ids (int32) | lengths (uint32)

A base's chain digest is its entry digest; a record's digest covers its parent's, so a digest
names one exact state (text, ids, ends).  ``apply`` returns None unless the record is intact,
names the given parent, and rebuilds a state whose ends rise exactly to its text's length.
"""

from __future__ import annotations

import struct

import numpy as np

from app.sessions import store_entry
from app.tokenization.diff import Run, align, common_prefix
from app.tokenization.state import SessionState

MAGIC = b"TKD1"
_HEAD = struct.Struct("<4s16sI")
_DIGEST = 16
_HEADER = _HEAD.size + _DIGEST
_SEGMENT = struct.Struct("<III")
_COPY, _INSERT = 0, 1
_SEARCH = 1 << 16
"""Bytes ``align`` looks ahead for text that agrees again after an edit."""
_MIN_COPY = 8
"""Shorter stretches of the parent's tokens are sent as new tokens (a segment is 12 bytes)."""
_ALIGN_TRIES = 8
_MAX_TEXT = (1 << 31) - 1


def encode(parent: SessionState, parent_digest: bytes, state: SessionState) -> bytes:
    """A record that rebuilds ``state`` from ``parent`` (whose chain digest is given)."""
    segments: list[tuple[int, int, int]] = []
    text: list[bytes] = []
    ids: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    cursor = 0

    def insert(stop: int) -> None:
        start_byte, stop_byte = _start(state, cursor), _start(state, stop)
        segments.append((_INSERT, stop - cursor, stop_byte - start_byte))
        text.append(state.text[start_byte:stop_byte])
        ids.append(state.ids[cursor:stop])
        lengths.append(np.diff(state.ends[cursor:stop], prepend=np.int32(start_byte)))

    for first, at, count in _copies(parent, state):
        if at > cursor:
            insert(at)
        segments.append((_COPY, first, first + count))
        cursor = at + count
    if cursor < len(state.ids):
        insert(len(state.ids))
    new_ids = np.concatenate(ids) if ids else np.zeros(0, np.int32)
    new_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int32)
    head = _HEAD.pack(MAGIC, parent_digest, len(segments))
    body = (
        b"".join(_SEGMENT.pack(*s) for s in segments),
        *text,
        new_ids.astype("<i4", copy=False).tobytes(),
        new_lengths.astype("<u4", copy=False).tobytes(),
    )
    return b"".join((head, store_entry.checksum(head, body), *body))


def digest(record: bytes) -> bytes:
    """The chain digest of the state ``record`` rebuilds (trusted once ``apply`` accepted it)."""
    return record[_HEAD.size : _HEADER]


def apply(parent: SessionState, parent_digest: bytes, record: bytes) -> SessionState | None:
    """The state ``record`` rebuilds from ``parent``, or None unless it is exactly that."""
    if len(record) < _HEADER:
        return None
    magic, named_parent, count = _HEAD.unpack_from(record)
    table_end = _HEADER + _SEGMENT.size * count
    if magic != MAGIC or named_parent != parent_digest or len(record) < table_end:
        return None
    segments = [_SEGMENT.unpack_from(record, _HEADER + _SEGMENT.size * k) for k in range(count)]
    inserts = [s for s in segments if s[0] == _INSERT]
    new_tokens = sum(s[1] for s in inserts)
    ids_at = table_end + sum(s[2] for s in inserts)
    lengths_at = ids_at + 4 * new_tokens
    if len(record) != lengths_at + 4 * new_tokens:
        return None
    view = memoryview(record)
    if store_entry.checksum(view[: _HEAD.size], (view[_HEADER:],)) != digest(record):
        return None
    new_ids = np.frombuffer(record, "<i4", new_tokens, ids_at)
    new_lengths = np.frombuffer(record, "<u4", new_tokens, lengths_at).astype(np.int64)
    return _rebuild(parent, segments, view[table_end:ids_at], new_ids, new_lengths)


def _rebuild(
    parent: SessionState,
    segments: list[tuple[int, int, int]],
    new_text: memoryview,
    new_ids: np.ndarray,
    new_lengths: np.ndarray,
) -> SessionState | None:
    text: list[bytes | memoryview] = []
    ids: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    at_token = at_byte = 0
    for kind, x, y in segments:
        if kind == _COPY and 0 <= x < y <= len(parent.ids):
            start = _start(parent, x)
            text.append(parent.text[start : int(parent.ends[y - 1])])
            ids.append(parent.ids[x:y])
            lengths.append(np.diff(parent.ends[x:y], prepend=np.int32(start)).astype(np.int64))
        elif kind == _INSERT and int(new_lengths[at_token : at_token + x].sum()) == y:
            text.append(new_text[at_byte : at_byte + y])
            ids.append(new_ids[at_token : at_token + x])
            lengths.append(new_lengths[at_token : at_token + x])
            at_token, at_byte = at_token + x, at_byte + y
        else:
            return None
    joined = b"".join(text)
    all_ids = np.concatenate(ids).astype(np.int32) if ids else np.zeros(0, np.int32)
    total = np.cumsum(np.concatenate(lengths)) if lengths else np.zeros(0, np.int64)
    if len(joined) > _MAX_TEXT or (int(total[-1]) if len(total) else 0) != len(joined):
        return None
    if len(all_ids) and int(all_ids.min()) < 0:
        return None
    ends = total.astype(np.int32)
    all_ids.flags.writeable = False
    ends.flags.writeable = False
    return SessionState(text=joined, ids=all_ids, ends=ends)


def _copies(parent: SessionState, state: SessionState) -> list[tuple[int, int, int]]:
    """(parent token, state token, count): stretches of tokens ``state`` repeats, in order.

    ``align`` finds where the texts agree; inside each such run, the parent's tokens whose
    shifted starts are token starts of ``state`` too are compared (ids and ends) until they
    differ.  Every stretch is thus proven: same ids, same lengths, same bytes.
    """
    prefix = common_prefix(parent.text, state.text)
    runs = [Run(0, 0, prefix)] if prefix else []
    if prefix < len(parent.text) and prefix < len(state.text):
        runs += align(parent.text, state.text, prefix, search=_SEARCH)
    found: list[tuple[int, int, int]] = []
    cursor = 0
    for run in runs:
        shift = run.new_start - run.old_start
        inside = _first_inside(parent, run.old_start)
        last = int(np.searchsorted(parent.ends, np.int32(run.old_end), side="right"))
        for first in range(inside, min(inside + _ALIGN_TRIES, last)):
            at = _first_inside(state, _start(parent, first) + shift)
            if at < len(state.ids) and _start(state, at) == _start(parent, first) + shift:
                break
        else:
            continue
        span = min(last - first, len(state.ids) - at)
        if at < cursor or span < _MIN_COPY:
            continue
        if shift == 0 and first == at and _same_memory(parent, state):
            count = span
        else:
            differs = (parent.ids[first : first + span] != state.ids[at : at + span]) | (
                parent.ends[first : first + span] + np.int32(shift) != state.ends[at : at + span]
            )
            count = int(differs.argmax()) if differs.any() else span
        if count >= _MIN_COPY:
            found.append((first, at, count))
            cursor = at + count
    return found


def _same_memory(a: SessionState, b: SessionState) -> bool:
    """Whether both states' ids and ends are one memory each, so equal wherever both reach:
    an appended state's arrays usually extend its parent's in place (``growable``)."""
    return all(
        x.dtype == y.dtype and x.strides == y.strides and x.ctypes.data == y.ctypes.data
        for x, y in ((a.ids, b.ids), (a.ends, b.ends))
    )


def _start(state: SessionState, token: int) -> int:
    """Where token ``token`` starts (the text's length past the last token)."""
    return int(state.ends[token - 1]) if token else 0


def _first_inside(state: SessionState, offset: int) -> int:
    """The first token that starts at or after byte ``offset``."""
    return int(np.searchsorted(state.ends, np.int32(offset), side="left")) + 1 if offset else 0


def decode_chain(
    base: bytes, records: list[bytes], head: bytes, tokenizer: bytes
) -> SessionState | None:
    """The state a base entry and its records rebuild, or None unless every link holds and the
    last digest is ``head`` (the one the writer stored with them)."""
    state = store_entry.decode(base, tokenizer)
    at = store_entry.digest(base)
    for record in records:
        if state is None:
            return None
        state = apply(state, at, record)
        at = digest(record)
    return state if at == head else None
