"""Piece starts on the device: the per-character kernels plus the shared run scans.

The per-character rules of ``piece_starts`` (digits, punctuation, first letters, contraction
ends, sentinels) are one thread per character reading at most four characters back
(``cl100k_local_starts``, ``gpt2_local_starts``); the run-level facts (digit offsets,
whitespace runs) are ``run_scans`` on the backend's arrays, the code the twin runs on NumPy.
o200k's starts are a state scan (``run_scans.scan_states``) over the transfer functions that
``o200k_transfers`` writes one thread per character; DeepSeek-V3's are ``deepseek_starts``,
array operations on the backend's arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpu_kernels.backend import Backend, default_backend, per_item
from gpu_kernels.char_classes import CharCodes, CodePoints, N
from gpu_kernels.deepseek_starts import deepseek_starts
from gpu_kernels.piece_starts import DIGITS_PER_PIECE, NEW, STATES, Flags
from gpu_kernels.run_scans import (
    case_run_facts,
    gpt2_whitespace_starts,
    run_offsets,
    scan_states,
    whitespace_starts,
)


def device_starts(backend: Backend, family: str, codes: CharCodes, points: Any) -> Any:
    """Piece-start flags of device character codes (``folds`` exact for GPT-2, see
    ``classify``) and code points."""
    xp = backend.xp
    classes, folds = codes.classes, codes.folds
    n = len(classes)
    starts = xp.zeros(n, dtype=xp.bool_)
    if n == 0:
        return starts
    if family == "gpt2":
        per_item(backend, "gpt2_local_starts", n, classes, folds, np.int64(n), starts)
        gpt2_whitespace_starts(classes, starts, xp)
        starts[0] = True
        return starts
    if family == "deepseek_v3":
        return deepseek_starts(codes, points, xp)
    offsets = xp.ascontiguousarray(run_offsets(classes == N, xp), dtype=xp.int64)
    if family == "o200k":
        transfers = xp.empty((n, STATES), dtype=xp.uint8)
        per_item(backend, "o200k_transfers", n, classes, folds, codes.kinds, points, offsets,
                 *case_run_facts(classes, codes.kinds, xp), np.int64(n), transfers)  # fmt: skip
        return scan_states(transfers, xp) == NEW
    per_piece = np.int32(DIGITS_PER_PIECE[family])
    per_item(backend, "cl100k_local_starts", n, classes, folds, offsets, per_piece,
             np.int64(n), starts)  # fmt: skip
    whitespace_starts(classes, starts, xp)
    starts[0] = True
    return starts


def starts_on_device(
    family: str, codes: CharCodes, points: CodePoints, backend: Backend | None = None
) -> Flags:
    """``device_starts`` from and to host arrays (tests and the stage benchmark)."""
    backend = default_backend(backend)
    xp = backend.xp
    device_codes = CharCodes(*(xp.asarray(array) for array in codes))
    return backend.to_host(device_starts(backend, family, device_codes, xp.asarray(points)))
