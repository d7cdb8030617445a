"""The GPU cold-start encoder: every stage after the added-token split runs on the device.

Host: split added tokens off and normalize (``payload``), one copy of the UTF-8 bytes in.
Device: mark the added-token spans, find character starts and decode, look classes up (the
class table's blocks the text touches are probed on the host first, once per engine), piece
starts, compaction, byte ids, whole words / added tokens, the three BPE tiers, and the gather
into text order.  One copy of the ids out.  The same stages as ``TwinEncoder``, which proves
them on machines without a GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tokenizers import Tokenizer

from gpu_kernels.backend import Backend, default_backend, per_item
from gpu_kernels.byte_bpe import IdArray
from gpu_kernels.char_classes import BLOCKS, CharCodes, ClassTable
from gpu_kernels.cupy_bpe import DeviceMerges
from gpu_kernels.cupy_predicate import device_starts
from gpu_kernels.payload import Payload, nfc_windows, windows_normalized
from gpu_kernels.plan import EncoderPlan
from gpu_kernels.whole_words import WholeWords

LONGEST_PIECE = 8192
"""Longest piece (bytes) ``encode_unchanged`` takes on: the block tier merges one pair per
step, so a piece of L bytes costs ~L steps (``'a' * 10**7`` would hold the device for long);
such texts go to the CPU reference, which the proxy bounds on its own."""


class DeviceEncoder:
    """``encode(text)`` equals ``Tokenizer.encode(text, add_special_tokens=False).ids``."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        classes: ClassTable | None = None,
        backend: Backend | None = None,
    ) -> None:
        """``backend`` defaults to the GPU (CuPy); tests pass a host build of the kernels."""
        self.plan = EncoderPlan(tokenizer, classes)  # refuses families without predicates
        self._backend = default_backend(backend)
        xp = self._backend.xp
        merges = self.plan.merges
        self._merges = DeviceMerges(self._backend, merges)
        words = WholeWords(merges.words if merges.ignore_merges else {})
        self._words = (
            xp.asarray(words.slots), np.int64(words.mask), xp.asarray(words.bytes),
            xp.asarray(words.at), xp.asarray(words.ids), np.int64(words.max_len),
        )  # fmt: skip
        self._exact = np.int32(self.plan.family == "gpt2")
        self._tables: tuple[Any, Any, Any, Any] | None = None
        self._version = -1

    def encode(self, text: str) -> IdArray:
        ids = self._encode(text, utf8=None, unchanged_only=False)
        assert ids is not None
        return ids

    def encode_unchanged(self, text: str, utf8: bytes | None = None) -> IdArray | None:
        """The ids, or None when the normalizer changes the text (the tokens' byte extents
        are then not the text's: callers that need them take the reference path) or a piece
        is longer than ``LONGEST_PIECE``."""
        return self._encode(text, utf8=utf8, unchanged_only=True)

    def _encode(self, text: str, *, utf8: bytes | None, unchanged_only: bool) -> IdArray | None:
        if not text:
            return np.zeros(0, dtype=np.int32)
        for normalize_all in (False, True):  # the second when NFC did not hold after all
            payload = self.plan.split.payload(text, utf8=utf8, normalize_all=normalize_all)
            if unchanged_only and payload.rewritten:
                return None
            decoded = self._decoded(payload)
            if decoded is not None:
                break
        assert decoded is not None
        data, char_at, codes, points = decoded
        backend, xp = self._backend, self._backend.xp
        size = len(payload.data)
        starts = device_starts(backend, self.plan.family, codes, points)
        begin = char_at[xp.flatnonzero(starts)]
        end = xp.concatenate((begin[1:], xp.asarray([size], dtype=xp.int64)))
        pieces = len(begin)
        if unchanged_only and int((end - begin).max()) > LONGEST_PIECE:
            return None
        tokens = self._merges.byte_ids[data]
        if len(payload.added_ids):
            tokens[xp.asarray(payload.span_begin)] = xp.asarray(payload.added_ids)
        counts = xp.empty(pieces, dtype=xp.int32)
        done = xp.empty(pieces, dtype=xp.uint8)
        per_item(backend, "whole_words", pieces, data, begin, end, np.int64(pieces),
                 *self._words, tokens, counts, done)  # fmt: skip
        self._merges.merge(tokens, begin, end, done, counts)
        out_at = xp.cumsum(counts, dtype=xp.int64)
        out = xp.empty(int(out_at[-1]), dtype=xp.int32)
        out_at -= counts
        per_item(backend, "gather_ids", pieces, tokens, begin, counts, out_at, np.int64(pieces),
                 out)  # fmt: skip
        return backend.to_host(out)

    def _decoded(self, payload: Payload) -> tuple[Any, Any, CharCodes, Any] | None:
        """(marked bytes, first byte of each character, their codes, their code points) on the
        device; None when ``payload.assumed`` fails (the text is not in NFC, or may not be)."""
        backend, xp = self._backend, self._backend.xp
        data = xp.array(np.frombuffer(payload.data, dtype=np.uint8))  # a copy: marked in place
        spans = len(payload.span_begin)
        if spans:
            per_item(backend, "mark_spans", spans, data, xp.asarray(payload.span_begin),
                     xp.asarray(payload.span_end), np.int64(spans))  # fmt: skip
        char_at = xp.flatnonzero((data & 0xC0) != 0x80)
        n = len(char_at)
        points = xp.empty(n, dtype=xp.uint32)
        touched = xp.zeros(BLOCKS, dtype=xp.uint8)
        per_item(backend, "decode_utf8", n, data, char_at, np.int64(n), points, touched)
        tables = self._class_tables(touched)
        classes = xp.empty(n, dtype=xp.uint8)
        folds = xp.empty(n, dtype=xp.uint8)
        kinds = xp.empty(n, dtype=xp.uint8)
        nfc = xp.empty(n, dtype=xp.uint8)
        per_item(backend, "classify", n, points, np.int64(n), *tables, self._exact, classes,
                 folds, kinds, nfc)  # fmt: skip
        if payload.assumed:
            windows = nfc_windows(nfc, char_at, len(payload.data), xp)
            if windows is None or not windows_normalized(
                payload.data, backend.to_host(windows[0]), backend.to_host(windows[1])
            ):
                return None
        return data, char_at, CharCodes(classes, folds, kinds), points

    def _class_tables(self, touched: Any) -> tuple[Any, Any, Any, Any]:
        """The class, fold, case and NFC tables on the device, every block ``touched`` probed."""
        table = self.plan.classes
        table.ensure(np.flatnonzero(self._backend.to_host(touched)))
        if self._tables is None or self._version != table.version:
            xp = self._backend.xp
            self._tables = (
                xp.asarray(table.classes), xp.asarray(table.folds), xp.asarray(table.kinds),
                xp.asarray(table.nfc),
            )  # fmt: skip
            self._version = table.version
        return self._tables
