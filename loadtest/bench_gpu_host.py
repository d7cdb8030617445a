"""The host's share of the GPU cold-start path, stage by stage, measured in one run (no GPU).

    python loadtest/bench_gpu_host.py [--chars 1000000,4000000]
                                      [--tokenizers llama3,qwen3,gpt2,o200k,deepseek_v3]

``DeviceEncoder.encode`` does on the host what is not a kernel, a device array operation or a
copy: the payload (UTF-8 encode, added-token split, span arrays) and, for an NFC normalizer,
the check of the windows the device marks as suspect.  On the text ``bench_gpu.py`` encodes
(loadtest/agent_sessions ``corpus``, seed 11; Qwen3's in NFC, as agent text usually is), the
median of ``--repeat`` runs in milliseconds of:

* ``utf8``: ``text.encode()``;
* ``split``: ``AddedSplit.payload(text, utf8=...)``: the split with the bytes given, as the
  session tokenizer's GPU route calls it;
* ``payload``: ``AddedSplit.payload(text)``, as ``DeviceEncoder.encode`` calls it;
* ``nfc``: ``windows_normalized`` on the windows the device finds (found here with NumPy,
  outside the timing); 0 where the text is not NFC-assumed;
* ``host``: ``payload`` + ``nfc``, the host's time per ``encode`` (the GPU adds its own).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from tokenizers import Tokenizer

from app.tools import assets
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.payload import decode, marked, nfc_windows, windows_normalized
from gpu_kernels.plan import EncoderPlan
from loadtest.agent_sessions.session import corpus

_COLUMNS = ("utf8", "split", "payload", "nfc", "host")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chars", default="1000000,4000000")
    parser.add_argument("--tokenizers", default="llama3,qwen3,gpt2,o200k,deepseek_v3")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    paths = assets.fetch()
    table = ClassTable()
    print(f"ms, median of {args.repeat}")
    print(f"{'tokenizer':<12}{'chars':>10}" + "".join(f"{c:>9}" for c in _COLUMNS))
    for chars in map(int, args.chars.split(",")):
        raw = corpus(11, chars)
        for name in args.tokenizers.split(","):
            tokenizer = Tokenizer.from_file(str(paths[name]))
            text = unicodedata.normalize("NFC", raw) if tokenizer.normalizer else raw
            stages = _measure(EncoderPlan(tokenizer, table), text, args.repeat)
            cells = "".join(f"{s * 1e3:>9.2f}" for s in (*stages, stages[2] + stages[3]))
            print(f"{name:<12}{chars:>10,}{cells}")


def _measure(plan: EncoderPlan, text: str, repeat: int) -> tuple[float, float, float, float]:
    """Median seconds of: UTF-8 encode, split with the bytes given, whole payload, NFC check."""
    split = plan.split
    data = text.encode()
    payload = split.payload(text)
    nfc = 0.0
    if payload.assumed:
        points, char_at = decode(marked(payload))
        windows = nfc_windows(plan.classes.nfc_codes(points), char_at, len(data), np)
        assert windows is not None and windows_normalized(data, *windows)
        nfc = median_of(repeat, lambda: windows_normalized(data, *windows))
    return (
        median_of(repeat, text.encode),
        median_of(repeat, lambda: split.payload(text, utf8=data)),
        median_of(repeat, lambda: split.payload(text)),
        nfc,
    )


def median_of(runs: int, call: Callable[[], object]) -> float:
    """Median wall-clock seconds of ``runs`` calls (this machine is shared: the median of many
    resists a neighbour's burst better than one run)."""
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


if __name__ == "__main__":
    main()
