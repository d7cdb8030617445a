"""The native CPU encoder: a full exact encode in C, for the families the GPU path covers.

The stages are the cold-start path's (``gpu_kernels.twin``): added tokens split first
(``gpu_kernels.payload.AddedSplit``, its search in C: ``added_tokens``), then per stretch
between them the UTF-8 decoded, each character's class looked up in
``gpu_kernels.char_classes.ClassTable`` (the same arrays, probed from the reference's regex
engine, read by the C code in place), the split pattern's piece starts found (``scan.c``: bit
masks 64 characters at a time, by the GPU start predicates' rules; o200k, Tekken and Kimi
use them on ASCII blocks and their sequential matchers elsewhere, SmolLM2's digit segments
the GPT-2 matcher), and byte-level BPE per piece (``bpe.c``: the merges of
``gpu_kernels.byte_bpe.MergeTable.pair_slots``, a per-thread piece cache, whole words first
where the vocabulary has ``ignore_merges``; the bytes a trailing character-removing Split takes
out skipped, each piece merged in the parts between them).  The C part runs without the GIL,
so chunks of one text (``chunked``) encode on every core.

Text that NFC changes is normalized first, as the reference does, and the tokens' ends moved
back to the original text (``nfc``).  Where it cannot be sure of ids or ends it declines
(``encode`` returns None, the reason counted) and the caller takes the reference; a tokenizer
``EncoderPlan`` refuses it does not take at all.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from app.tokenization.native._native import Encoder
from app.tokenization.native.added_tokens import NativeAddedSpans
from app.tokenization.native.nfc import Alignment, normalized
from app.tokenization.reference import IdArray, OffsetArray, ReferenceEncoder
from gpu_kernels.char_bpe import CharacterMergeTable
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.payload import Payload
from gpu_kernels.plan import EncoderPlan

FAMILIES = (
    "cl100k", "qwen2", "gpt2", "o200k", "deepseek_v3", "gpt2_digits", "tekken", "qwen35",
    "spaces_replaced", "kimi",
)  # fmt: skip
"""The scanners of ``scan.c``, in the order of its family codes."""

PROBE_LATER_BELOW = 32 << 10
"""Bytes per class block it would be the first to touch under which a text goes to the
reference while the blocks are probed in the background (``NativeEncoder``): probing a block
takes ~20 ms, about what the reference takes on 30 KB."""

_MARK = "\u2581".encode()
"""Gemma's space mark: in the text itself it would spell what a space spells."""
_ENDS_DO_NOT_ADD_UP = 1
_ENDS_REASONS = {
    _ENDS_DO_NOT_ADD_UP: "the tokens' bytes do not add up to the text",
    2: "a token ends inside a character NFC changed",
}
"""The C part's codes where it has no ends (``native.h``: ENDS_*); never expected."""

_shared_classes: ClassTable | None = None
_classes_lock = threading.Lock()
_probe_lock = threading.Lock()
_pending: set[tuple[int, int]] = set()
"""(id of a class table, block) being probed in the background."""
_pending_lock = threading.Lock()


def shared_classes() -> ClassTable:
    """One class table per process: it depends on the engine only, and probing costs."""
    global _shared_classes
    with _classes_lock:
        if _shared_classes is None:
            _shared_classes = ClassTable()
        return _shared_classes


class NativeEncoder:
    """``encode(text)`` equals ``reference.encode(text)`` (ids and byte ends), or is None
    (declined); thread-safe, and encodes in parallel across threads."""

    def __init__(
        self,
        reference: ReferenceEncoder,
        classes: ClassTable | None = None,
        *,
        probe_later_below: int = 0,
    ) -> None:
        """Raises ``gpu_kernels.UnsupportedTokenizer`` for a tokenizer it does not cover.

        A text that touches class blocks not probed yet waits for them to be probed, unless
        it is shorter than ``probe_later_below`` bytes per such block: then it is declined
        (the reference encodes it) and a background thread probes them, so that a short
        fresh stretch does not pay ~20 ms per block in a live call (``PROBE_LATER_BELOW``)."""
        self.reference = reference
        self._probe_later_below = probe_later_below
        self.plan = EncoderPlan(
            reference.tokenizer,
            classes or shared_classes(),
            families=FAMILIES,
            drops=True,
            finder=NativeAddedSpans,
        )
        table, merges = self.plan.classes, self.plan.merges
        self._dropped = self.plan.dropped
        words = merges.words if merges.ignore_merges else {}
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        chars = merges.char_ids if isinstance(merges, CharacterMergeTable) else None
        self._marks_declined = chars is not None
        # Added tokens holding the mark match only a literal one, which is declined: their ids
        # (Gemma's "▁▁"...) come from merged spaces, with the vocabulary's lengths.
        added = {
            i: len(token.content.encode())
            for i, token in reference.tokenizer.get_added_tokens_decoder().items()
            if not (self._marks_declined and "\u2581" in token.content)
        }
        self._lengths = _token_lengths(merges.byte_lengths(), added)
        self._core = Encoder(
            FAMILIES.index(self.plan.family),
            table.classes, table.folds, table.kinds, table.nfc, table.probed, table.numeric,
            table.han,
            merges.byte_ids, merges.pair_keys, merges.pair_ranks, merges.pair_merged,
            int(merges.width), merges.ignore_merges,
            b"".join(words), np.concatenate(([0], np.cumsum(lengths))),
            np.fromiter(words.values(), dtype=np.int32, count=len(words)),
            self._dropped.tobytes(), self._lengths, chars,
        )  # fmt: skip
        self._lock = threading.Lock()
        self._declined: Counter[str] = Counter()
        self._texts = 0
        with _probe_lock:  # the block every text touches (ASCII) now, not in the first call
            self.plan.classes.ensure(np.zeros(1, dtype=np.int64))

    def encode(self, text: str, utf8: bytes | None = None) -> tuple[IdArray, OffsetArray] | None:
        """The ids of ``text`` (``utf8``: its UTF-8 when the caller has it) and each token's
        end in its bytes, or None (declined)."""
        return self.encode_utf8(text.encode() if utf8 is None else utf8)  # lone surrogates raise

    def encode_utf8(self, data: bytes) -> tuple[IdArray, OffsetArray] | None:
        """``encode`` of a text given as its UTF-8 alone (valid: the encoding of a ``str``),
        so that the chunks of a text need not be decoded for it."""
        # its lead byte first: memchr, where the search for the three bytes read ~1 GB/s
        if self._marks_declined and _MARK[0] in data and _MARK in data:
            return self._declines("a literal U+2581 in the text (spaces become it)")
        split = self.plan.split
        payload = split.payload_of(data)
        if payload.rewritten:  # a normalizer other than NFC changed it
            return self._declines("the normalizer changes the text")
        found = self._encoded(payload, check_nfc=payload.assumed)
        if found is None:  # a character Python lacks: the reference's normalizer decides
            if split.payload_of(data, normalize_all=True).rewritten:
                return self._declines("NFC changes text with characters Python lacks")
            found = self._encoded(payload)
        if isinstance(found, bytes):
            begin, end = np.frombuffer(found, dtype=np.int64).reshape(-1, 2).T
            nfc = normalized(payload, begin, end)
            if nfc is None:
                return self._declines("NFC changes text next to an added token")
            if nfc[0].rewritten:
                return self._normalized(*nfc)
            found = self._encoded(payload)
        return self._result(payload, *found) if isinstance(found, tuple) else None

    def prepare(self, utf8: bytes) -> None:
        """Before a text is encoded in parts (``chunked``): the class blocks it touches are
        probed now where the whole text is long enough to wait for them, as ``encode``
        decides for one text; else left to the background.  Without it each 32 KiB chunk of
        a process's first 1M-character cold start is too short for its new blocks, and all
        of them went to the reference."""
        missing = self._core.missing_blocks(utf8)
        if not missing:
            return
        if len(utf8) < self._probe_later_below * len(missing):
            self._probe_later(missing)
            return
        with _probe_lock:
            self.plan.classes.ensure(np.asarray(missing, dtype=np.int64))

    def _normalized(self, nfc: Payload, alignment: Alignment) -> tuple[IdArray, OffsetArray] | None:
        """Encode of a payload's NFC ``nfc``, its tokens' ends moved back by ``alignment``."""
        encoded = self._encoded(nfc, moves=alignment.moves())
        if not isinstance(encoded, tuple):
            return None
        ids, ends = encoded
        return self._result(nfc, ids, ends if ends != 0 else _ENDS_DO_NOT_ADD_UP)

    def _encoded(
        self, payload: Payload, *, check_nfc: bool = False, moves: bytes = b""
    ) -> tuple[bytes, bytes | int] | bytes | bool | None:
        """The C part's answer for ``payload``, its class blocks probed first (inline, or,
        for a text too short to wait, in the background: then False): (ids, ends), or with
        ``check_nfc`` the NFC windows to look at or None (``_native.pyi``)."""
        args = (payload.data, payload.span_begin, payload.span_end, payload.added_ids)
        result = self._core.encode(*args, check_nfc, moves)
        while isinstance(result, list):  # class blocks to probe first (once per process)
            if len(payload.data) < self._probe_later_below * len(result):
                self._probe_later(result)
                self._declines("class blocks are being probed")
                return False
            with _probe_lock:
                self.plan.classes.ensure(np.asarray(result, dtype=np.int64))
            result = self._core.encode(*args, check_nfc, moves)
        with self._lock:
            self._texts += isinstance(result, tuple)
        return result

    def _result(
        self, payload: Payload, ids_bytes: bytes, ends: bytes | int
    ) -> tuple[IdArray, OffsetArray] | None:
        """The ids and ends of an encode, or None (the reason counted) where there are no
        ends: 0 when bytes are dropped (then they come from the reference's rule)."""
        ids = np.frombuffer(ids_bytes, dtype=np.int32)
        if isinstance(ends, bytes):
            return ids, np.frombuffer(ends, dtype=np.int32)
        if ends == 0:
            found = self._ends_around_dropped(ids, payload)
            return None if found is None else (ids, found)
        return self._declines(_ENDS_REASONS[ends])

    def _probe_later(self, blocks: list[int]) -> None:
        """Probes ``blocks`` in a thread of their own, unless one is at it already."""
        table = self.plan.classes
        with _pending_lock:
            fresh = [b for b in blocks if (id(table), b) not in _pending]
            _pending.update((id(table), b) for b in fresh)
        if not fresh:
            return

        def probe() -> None:  # a block at a time: an inline probe waits for one at most
            try:
                for block in fresh:
                    with _probe_lock:
                        table.ensure(np.asarray([block], dtype=np.int64))
            finally:
                with _pending_lock:
                    _pending.difference_update((id(table), b) for b in fresh)

        threading.Thread(target=probe, name="probe-class-blocks", daemon=True).start()

    def stats(self) -> dict[str, Any]:
        """Texts encoded, and those declined by reason."""
        with self._lock:
            return {"texts": self._texts, "declined": dict(self._declined)}

    def _ends(self, ids: IdArray, size: int) -> OffsetArray | None:
        """Each token's end, from the tokens' byte lengths; None (counted: never expected)
        unless they add up to the ``size`` bytes encoded."""
        ends = np.cumsum(self._lengths[ids], dtype=np.int32)
        if (ends[-1] if len(ends) else 0) != size:
            self._declines("the tokens' bytes do not add up to the text")
            return None
        return ends

    def _ends_around_dropped(self, ids: IdArray, payload: Payload) -> OffsetArray | None:
        """Each token's end as the reference's offsets give it when bytes were dropped: a
        token ending inside a character ends at that character's end, and the dropped bytes
        belong to the token before them."""
        data = np.frombuffer(payload.data, dtype=np.uint8)
        kept = self._dropped[data] == 0
        for begin, end in zip(payload.span_begin, payload.span_end, strict=True):
            kept[begin:end] = True  # added tokens keep their bytes
        if kept.all() or not len(ids):
            return self._ends(ids, int(kept.sum()))
        at = np.flatnonzero(kept)
        used = np.cumsum(self._lengths[ids])
        if used[-1] != len(at):
            return self._ends(ids, -1)  # declines (counted): never expected
        chars = np.append(np.flatnonzero((data & 0xC0) != 0x80), len(data))
        last = at[used - 1] + 1
        first = at[np.append(0, used[:-1])]
        ceil = chars[np.searchsorted(chars, last)]
        floor = chars[np.searchsorted(chars, first[1:], side="right") - 1]
        ends: OffsetArray = np.maximum(ceil, np.append(floor, len(data))).astype(np.int32)
        return ends

    def _declines(self, reason: str) -> tuple[IdArray, OffsetArray] | None:
        """Counts ``reason``; None (the encode's answer)."""
        with self._lock:
            self._declined[reason] += 1
        return None


def _token_lengths(vocabulary: Mapping[int, int], added: Mapping[int, int]) -> IdArray:
    """The bytes of every id the encoder can give (id -> bytes): the vocabulary's (every merge
    makes one of its tokens) and the added tokens'."""
    size = max([*vocabulary, *added], default=-1) + 1
    lengths = np.zeros(size, dtype=np.int32)
    for table in (vocabulary, added):
        lengths[list(table)] = list(table.values())
    return lengths
