"""The native CPU encoder: a full exact encode in C, for the families the GPU path covers.

The stages are the cold-start path's (``gpu_kernels.twin``): added tokens split first
(``gpu_kernels.payload.AddedSplit``), then per stretch between them the UTF-8 decoded, each
character's class looked up in ``gpu_kernels.char_classes.ClassTable`` (the same arrays,
probed from the reference's regex engine, read by the C code in place), the split pattern run
as a sequential matcher (``scan.c``), and byte-level BPE per piece (``bpe.c``: the merges of
``gpu_kernels.byte_bpe.MergeTable.pair_slots``, a per-thread piece cache, whole words first
where the vocabulary has ``ignore_merges``).  The C part runs without the GIL, so chunks of one
text (``chunked``) encode on every core.

Where its ids might not be the reference's it declines (``encode`` returns None, with the
reason counted) and the caller takes the reference: a text that NFC would change (the tokens'
byte extents are then not the text's), and any tokenizer ``EncoderPlan`` refuses.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any
from unicodedata import is_normalized

import numpy as np
from tokenizers import Tokenizer

from app.tokenization.native._native import Encoder
from app.tokenization.reference import IdArray
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.payload import Payload
from gpu_kernels.plan import EncoderPlan
from gpu_kernels.whole_words import WholeWords

FAMILIES = ("cl100k", "qwen2", "gpt2", "o200k", "deepseek_v3")
"""The scanners of ``scan.c``, in the order of its family codes."""

_shared_classes: ClassTable | None = None
_classes_lock = threading.Lock()
_probe_lock = threading.Lock()


def shared_classes() -> ClassTable:
    """One class table per process: it depends on the engine only, and probing costs."""
    global _shared_classes
    with _classes_lock:
        if _shared_classes is None:
            _shared_classes = ClassTable()
        return _shared_classes


class NativeEncoder:
    """``encode(text)`` equals ``Tokenizer.encode(text, add_special_tokens=False).ids``, or
    is None (declined); thread-safe, and encodes in parallel across threads."""

    def __init__(self, tokenizer: Tokenizer, classes: ClassTable | None = None) -> None:
        """Raises ``gpu_kernels.UnsupportedTokenizer`` for a tokenizer it does not cover."""
        self.plan = EncoderPlan(tokenizer, classes or shared_classes())
        table, merges = self.plan.classes, self.plan.merges
        slots = merges.pair_slots()
        words = WholeWords(merges.words if merges.ignore_merges else {})
        self._core = Encoder(
            FAMILIES.index(self.plan.family),
            table.classes, table.folds, table.kinds, table.probed,
            merges.byte_ids, slots.keys, slots.ranks, slots.merged, slots.shift,
            int(merges.width), merges.ignore_merges,
            words.slots, words.bytes, words.at, words.ids,
        )  # fmt: skip
        self._lock = threading.Lock()
        self._declined: Counter[str] = Counter()
        self._texts = 0

    def encode(self, text: str, utf8: bytes | None = None) -> IdArray | None:
        """The ids of ``text`` (``utf8``: its UTF-8 when the caller has it), or None when the
        normalizer would change it."""
        payload = self.plan.split.payload(text, utf8=utf8)
        if payload.rewritten or (payload.assumed and not _stretches_normalized(payload)):
            with self._lock:
                self._declined["normalizer changes the text"] += 1
            return None
        args = (payload.data, payload.span_begin, payload.span_end, payload.added_ids)
        result = self._core.encode(*args)
        while isinstance(result, list):  # class blocks to probe first (once per process)
            with _probe_lock:
                self.plan.classes.ensure(np.asarray(result, dtype=np.int64))
            result = self._core.encode(*args)
        with self._lock:
            self._texts += 1
        return np.frombuffer(result, dtype=np.int32)

    def stats(self) -> dict[str, Any]:
        """Texts encoded, and those declined by reason."""
        with self._lock:
            return {"texts": self._texts, "declined": dict(self._declined)}


def _stretches_normalized(payload: Payload) -> bool:
    """Whether each stretch between added tokens is in NFC (the reference normalizes each
    alone; a text in NFC may hold a stretch that is not, one opening with a mark)."""
    data = payload.data
    starts = [0, *payload.span_end.tolist()]
    stops = [*payload.span_begin.tolist(), len(data)]
    return all(is_normalized("NFC", data[a:b].decode()) for a, b in zip(starts, stops, strict=True))
