"""Appends in O(append) for tokenizers whose text is not pre-split (SentencePiece BPE).

HF encodes such a text as: added tokens cut out of the raw text (leftmost-longest), each other
segment normalized (``▁`` prepended, spaces made ``▁``; or no normalizer at all) and BPE-encoded
as one piece.  When a text grows, only its last segment changes: this module keeps, per stored
session state, the incremental BPE state of that segment, feeds it the appended part and encodes
any new segments; the ids before the last segment's pending tokens are reused as they are.

The path is taken only when it is provably the reference's: no added-token occurrence crosses
the old end of the text, and the segments involved hold no normalized added token (matched
after normalization) and no literal ``▁``.  Otherwise the caller encodes in full, which also
restarts the tail.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.tokenization.incremental_bpe import IncrementalBPE, IncrementalState, VocabularyError
from app.tokenization.reference import int32_array
from app.tokenization.state import SessionState

SPACE = "\u2581"  # ▁, SentencePiece's space
PREPEND_SPACES = [
    {"type": "Prepend", "prepend": SPACE},
    {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
]
"""The normalizers of the Llama/Mistral SentencePiece BPE files, as tokenizer.json spells them."""

_SLICE_CHARS = 1 << 16
"""Characters fed to the incremental BPE, or searched for added tokens, at a time: one call
on a long text holds the GIL throughout (a feed ~22 ms a million characters)."""


def prepend_spaces(text: str, *, at_start: bool = True) -> str:
    """``PREPEND_SPACES`` applied: ``▁`` before a text's start, every space a ``▁``
    (``at_start=False`` for a continuation of a text being streamed in parts)."""
    body = text.replace(" ", SPACE)
    return SPACE + body if at_start and text else body


_ENTRY_BYTES = 256  # an entry's own objects, beside its tail's dumped BPE state


@dataclass(frozen=True, slots=True)
class _Tail:
    """The open last segment of a stored text: its BPE state and where its pending ids start.

    A state whose text ends with an added token (or is empty) is stored with no tail."""

    state: bytes  # IncrementalState.dump()
    pending_from: int  # index in the stored ids of the segment's first pending id
    raw_from: int  # byte offset in the text where that id's bytes start
    first_char: int  # when that id is the segment's first: its first character's UTF-8 size


@dataclass(frozen=True, slots=True)
class _Entry:
    state: weakref.ref[SessionState]
    tail: _Tail | None
    nbytes: int


class BpeAppender:
    """Extends stored session states by appended text; see the module docstring."""

    def __init__(self, document: dict[str, Any], bpe: IncrementalBPE, max_bytes: int) -> None:
        normalizer = document.get("normalizer")
        self._prepend = normalizer is not None
        added = document.get("added_tokens") or []
        self._special = {t["content"]: int(t["id"]) for t in added if not t.get("normalized")}
        self._normalized = [t["content"] for t in added if t.get("normalized")]
        contents = sorted(self._special, key=len, reverse=True)
        self._split = re.compile("|".join(map(re.escape, contents))) if contents else None
        self._longest = max(map(len, self._special), default=0)
        self._bpe = bpe
        vocab: dict[str, int] = document["model"]["vocab"]
        self._raw_length = np.zeros(max(vocab.values(), default=0) + 1, dtype=np.int32)
        self._is_byte = np.zeros(len(self._raw_length), dtype=bool)  # byte fallback ids
        for piece, token_id in vocab.items():
            self._is_byte[token_id] = re.fullmatch(r"<0x[0-9A-F]{2}>", piece) is not None
            length = 1 if self._is_byte[token_id] else len(piece.replace(SPACE, " ").encode())
            self._raw_length[token_id] = length
        for content, token_id in self._special.items():
            self._raw_length[token_id] = len(content.encode())
        # by id() of the state, held weakly: a tail lives only as long as its state (which the
        # session registry holds and evicts); a dead state's id is queued by its weakref's
        # callback and purged under the lock (the callback itself takes no lock)
        self._tails: OrderedDict[int, _Entry] = OrderedDict()
        self._dead: list[int] = []
        self._bytes = 0
        self._max_bytes = max_bytes
        self._lock = threading.Lock()

    @classmethod
    def for_file(cls, path: str | Path, *, max_bytes: int = 256 << 20) -> BpeAppender | None:
        """An appender when the file's text is BPE-encoded without pre-split, else None.

        ``max_bytes`` bounds the tails it keeps (LRU); each is dropped with its state, which
        it holds weakly, so it keeps no evicted state alive.
        """
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        normalizer = document.get("normalizer")
        plain = normalizer is None or normalizer == {
            "type": "Sequence",
            "normalizers": PREPEND_SPACES,
        }
        strips = any(
            t.get(flag) for t in document.get("added_tokens") or []
            for flag in ("lstrip", "rstrip", "single_word")
        )  # fmt: skip
        if document.get("pre_tokenizer") is not None or not plain or strips:
            return None
        try:
            return cls(document, IncrementalBPE.from_file(path), max_bytes)
        except VocabularyError:
            return None

    def remember(self, state: SessionState, text: str) -> None:
        """Record the tail of a state encoded in full (O(text) scan, O(last segment) BPE)."""
        matches = self._matches(text)
        start = matches[-1].end() if matches else 0
        if self._unsupported(text[start:]):
            return  # no entry: appends to this state take the full path
        segment = text[start:]
        if not segment:
            self._put(state, None)
            return
        bpe = self._bpe.start()
        segment_ids = self._feed(bpe, segment, True)
        first = len(segment[0].encode()) if self._prepend else 0
        self._put(state, self._tail(bpe, segment_ids, len(state.ids), len(state.text), first))

    def append(self, base: SessionState, data: bytes) -> SessionState | None:
        """The state of ``data`` (``base.text`` plus appended bytes), or None if not provable."""
        with self._lock:
            entry = self._tails.get(id(base))
        if entry is None or entry.state() is not base:
            return None
        tail = entry.tail
        if len(data) == len(base.text):
            return base
        added = data[len(base.text) :].decode("utf-8")
        old_end = base.text[-4 * self._longest :].decode("utf-8", errors="ignore")
        if (
            self._crosses(old_end, added)
            or self._unsupported(added)
            or self._unsupported(old_end + added, metaspace=False)  # an added token across
        ):
            return None
        matches = self._matches(added)
        bounds = [0, *(x for m in matches for x in (m.start(), m.end())), len(added)]
        ids: list[int] = []
        ends: list[int] = []
        end = len(base.text)
        keep = len(base.ids)
        new_tail: _Tail | None = None
        for index in range(0, len(bounds), 2):
            segment = added[bounds[index] : bounds[index + 1]]
            state: IncrementalState | None = None
            first = 0
            if index == 0 and tail is not None:  # the old last segment goes on
                state = self._bpe.restore(tail.state)
                keep, end, first = tail.pending_from, tail.raw_from, tail.first_char
                segment_ids = self._feed(state, segment, False)
            elif segment:
                state = self._bpe.start()
                first = len(segment[0].encode()) if self._prepend else 0
                segment_ids = self._feed(state, segment, True)
            if state is not None:
                end = self._extend(data, ids, ends, segment_ids, end, first)
            if index + 2 < len(bounds):
                match = matches[index // 2].group()
                end = self._extend(data, ids, ends, [self._special[match]], end, 0)
            elif state is not None:
                new_tail = self._tail(state, segment_ids, keep + len(ids), end, first)
        grown = base.extended(data, keep, [int32_array(ids)], [int32_array(ends)])
        self._put(grown, new_tail)
        return grown

    def _tail(
        self, state: IncrementalState, segment_ids: list[int], ids: int, end: int, first: int
    ) -> _Tail:
        """The tail after ``segment_ids`` (this call's ids of the last segment) ended the text
        at id count ``ids`` and byte ``end``; ``first`` as for ``_extend``."""
        pending = len(state.pending())
        tail_ids = segment_ids[len(segment_ids) - pending :]
        still_first = first if pending == len(segment_ids) else 0
        raw_from = end - int(self._raw_length[tail_ids].sum()) + (1 if still_first else 0)
        return _Tail(state.dump(), ids - pending, raw_from, still_first)

    def _feed(self, state: IncrementalState, segment: str, at_start: bool) -> list[int]:
        """Ids of the segment's part: the ones that became final, then the pending ones.  Fed
        ``_SLICE_CHARS`` characters at a time, as successive appends."""
        normalized = self._normalize(segment, at_start=at_start)
        ids: list[int] = []
        for k in range(0, len(normalized), _SLICE_CHARS):
            ids += state.feed(normalized[k : k + _SLICE_CHARS].encode())
        return ids + state.pending()

    def _matches(self, text: str) -> list[re.Match[str]]:
        """``self._split.finditer(text)``, searched ``_SLICE_CHARS`` characters at a time: a
        match starting in a window lies within the window and ``_longest`` more characters."""
        found: list[re.Match[str]] = []
        at = 0
        while self._split is not None and at < len(text):
            stop = min(at + _SLICE_CHARS, len(text))
            match = self._split.search(text, at, stop + self._longest)
            if match is None or match.start() >= stop:
                at = stop
            else:
                found.append(match)
                at = match.end()
        return found

    def _normalize(self, text: str, *, at_start: bool) -> str:
        return prepend_spaces(text, at_start=at_start) if self._prepend else text

    def _crosses(self, before: str, after: str) -> bool:
        """Whether an added token occurs across the boundary between the two texts (the
        longest one starting at a position is the one that reaches furthest)."""
        if self._split is None:
            return False
        head = before[-self._longest :]
        joined = head + after[: self._longest]
        return any(
            (found := self._split.match(joined, start)) is not None and found.end() > len(head)
            for start in range(len(head))
        )

    def _unsupported(self, text: str, *, metaspace: bool = True) -> bool:
        """A normalized added token occurs (HF matches those after normalizing), or a literal
        ``▁``, whose bytes a token's length no longer tells apart from a space's."""
        if metaspace and self._prepend and SPACE in text:
            return True
        spaced = text.replace(" ", SPACE)
        return any(c in text or c in spaced for c in self._normalized)

    def _extend(
        self, data: bytes, ids: list[int], ends: list[int], new: list[int], end: int, first: int
    ) -> int:
        """Append ``new`` ids and their ends as HF reports them; return the byte offset after
        them (``data``: the whole text).

        ``first`` > 0 when ``new`` starts a segment (the UTF-8 size of its first character):
        its first token holds the prepended ``▁``, which stands for no byte, and a token that
        is only that ``▁`` ends after the segment's first character.  Byte-fallback tokens all
        end where their character ends.
        """
        start = end
        for i, token_id in enumerate(new):
            end += int(self._raw_length[token_id]) - (1 if first and i == 0 else 0)
            ids.append(token_id)
            if first and i == 0 and end == start:
                ends.append(start + first)
            elif self._is_byte[token_id]:
                char_end = end
                while char_end < len(data) and data[char_end] & 0xC0 == 0x80:
                    char_end += 1
                ends.append(char_end)
            else:
                ends.append(end)
        return end

    def _put(self, state: SessionState, tail: _Tail | None) -> None:
        key = id(state)
        size = _ENTRY_BYTES + (len(tail.state) if tail is not None else 0)
        dead = self._dead

        def died(_: weakref.ref[SessionState]) -> None:
            dead.append(key)

        entry = _Entry(weakref.ref(state, died), tail, size)
        with self._lock:
            self._purge()
            self._remove(key)
            self._tails[key] = entry
            self._bytes += size
            while self._bytes > self._max_bytes and len(self._tails) > 1:
                self._bytes -= self._tails.popitem(last=False)[1].nbytes

    def _purge(self) -> None:
        """Drops the entries of states that died (under the lock)."""
        while self._dead:
            key = self._dead.pop()
            entry = self._tails.get(key)
            if entry is not None and entry.state() is None:
                self._remove(key)

    def _remove(self, key: int) -> None:
        entry = self._tails.pop(key, None)
        if entry is not None:
            self._bytes -= entry.nbytes

    def held(self) -> tuple[int, int]:
        """(tails kept, their bytes)."""
        with self._lock:
            self._purge()
            return len(self._tails), self._bytes
