"""The session tokenizer's route "gpu": cold starts of large texts tokenized on the GPU.

A cold start (no stored transcript to repair from) of at least ``--gpu-cold-start`` bytes goes
to ``gpu_kernels.DeviceEncoder`` when this machine can run it (CuPy, a CUDA device, NVRTC, and
a covered pre-tokenizer family); everything else, and any GPU failure, takes the CPU reference.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from tokenizers import Tokenizer

from app.tokenization.reference import IdArray

log = logging.getLogger(__name__)


class ColdEncoder(Protocol):
    def encode_unchanged(self, text: str, utf8: bytes | None = None) -> IdArray | None:
        """Exact ids of ``text`` (``utf8``: its UTF-8), or None when its normalizer would
        change it."""


class GpuColdStarts:
    """One cold start at a time on the device; a failure is logged and answered with None."""

    def __init__(self, encoder: ColdEncoder, min_bytes: int) -> None:
        self.min_bytes = min_bytes
        self._encoder = encoder
        self._lock = threading.Lock()
        self.failures = 0

    def encode(self, text: str, utf8: bytes) -> IdArray | None:
        """The ids from the GPU, or None: text under ``min_bytes``, changed by its normalizer,
        or a device failure (the caller then encodes on the CPU).  ``utf8``: the text's."""
        if len(utf8) < self.min_bytes:
            return None
        with self._lock:
            try:
                return self._encoder.encode_unchanged(text, utf8)
            except Exception:  # a CUDA, driver or memory failure must not fail the request
                self.failures += 1
                log.exception("GPU cold start failed; encoding on the CPU")
                return None


def gpu_cold_starts(tokenizer: Tokenizer, min_bytes: int) -> GpuColdStarts | None:
    """The GPU route for ``tokenizer`` when this machine has one (``min_bytes`` > 0), else None;
    says why in the log either way."""
    if min_bytes <= 0:
        log.info("GPU cold starts off (--gpu-cold-start 0, the default)")
        return None
    # Imported here: gpu_kernels builds on app.tokenization, whose package imports this module.
    from gpu_kernels import UnsupportedTokenizer, unavailable_reason
    from gpu_kernels.device_encoder import DeviceEncoder

    reason = unavailable_reason()
    if reason is not None:
        log.info("GPU cold starts off: %s", reason)
        return None
    try:
        encoder = DeviceEncoder(tokenizer)
    except UnsupportedTokenizer as exc:
        log.info("GPU cold starts off: %s", exc)
        return None
    log.info("GPU cold starts on for texts of %d bytes or more", min_bytes)
    return GpuColdStarts(encoder, min_bytes)
