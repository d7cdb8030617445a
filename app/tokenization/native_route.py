"""Which engine encodes on the CPU: the native encoder where it covers the family, else the
reference (``--cpu-encoder``)."""

from __future__ import annotations

import logging
from typing import Literal, get_args

from app.tokenization.chunked import NativeIds
from app.tokenization.reference import ReferenceEncoder

log = logging.getLogger(__name__)

CpuEncoder = Literal["native", "reference"]
CPU_ENCODERS: tuple[str, ...] = get_args(CpuEncoder)


def native_encoder(reference: ReferenceEncoder, choice: CpuEncoder) -> NativeIds | None:
    """The native encoder of ``tokenizer`` when ``choice`` is "native" and it covers the
    tokenizer, else None (the reference encodes); says why in the log."""
    return native_or_why(reference, choice)[0]


def native_or_why(
    reference: ReferenceEncoder, choice: CpuEncoder
) -> tuple[NativeIds | None, str | None]:
    """``native_encoder``, and why there is none (None when there is one)."""
    if choice not in CPU_ENCODERS:
        raise ValueError(f"cpu_encoder must be one of {', '.join(CPU_ENCODERS)}, not {choice!r}")
    if choice == "reference":
        return None, "--cpu-encoder reference"
    # Imported here: gpu_kernels builds on app.tokenization, whose package imports this module.
    from gpu_kernels import UnsupportedTokenizer

    try:
        from app.tokenization.native.encoder import PROBE_LATER_BELOW, NativeEncoder
    except ImportError as exc:  # a checkout whose C extensions are not built
        log.warning("native encoder off (%s): build it with pip install -e .", exc)
        return None, f"not built: {exc}"
    try:
        return NativeEncoder(reference, probe_later_below=PROBE_LATER_BELOW), None
    except UnsupportedTokenizer as exc:
        log.info("native encoder off, the reference encodes: %s", exc)
        return None, str(exc)
