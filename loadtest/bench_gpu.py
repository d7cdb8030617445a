"""The GPU cold-start encoder against the CPU's, measured in one run.

    python loadtest/bench_gpu.py [--chars 1000000,4000000]
                                 [--tokenizers llama3,qwen3,gpt2,o200k,deepseek_v3]

For each tokenizer and size, one generated agent transcript (loadtest/agent_sessions
``corpus``, added tokens included; it plants decomposed accents, so a tokenizer with a
normalizer, Qwen3's NFC, gets a second row "+nfc" with the text in NFC, as agent transcripts
usually are: the planted ones make the host run the engine's normalizer) and, best of
``--repeat``:

* ``ref enc``: the reference ``encode`` (one thread, with offsets);
* ``ref fast``: ``encode_batch_fast([text])`` (one thread, no offsets);
* ``cpu chunks``: the session tokenizer's cold start on the CPU, as the proxy runs it with
  ``--gpu-cold-start 0`` (``TranscriptEncoder``: the native encoder where it covers the
  family, the text cut at stable cuts into chunks encoded on every core; UTF-8 encode
  included), its ids checked equal to the reference's: what the GPU route competes with on
  the same machine;
* ``gpu``: ``DeviceEncoder.encode`` end to end (str in, host ids out: the added-token split,
  both copies and every kernel), its ids checked equal to the reference's;
* ``host``: the host's share of ``gpu`` (the added-token split and UTF-8 encode; stage by
  stage, without a GPU: ``bench_gpu_host.py``).

Kernels are compiled and class blocks probed before timing (a warm-up encode).  Without a
GPU the first three columns are measured and the others print "-", so the CPU side can be
set against device figures measured elsewhere on the same texts.  ``--profile``
then prints, for the last size of each row, each kernel's time (the device synchronised
around every launch) and what is left: CuPy's array operations, the copies and the host;
then the host functions of one more encode by their own time (``cProfile``).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy.typing as npt
from tokenizers import Tokenizer

from app.tokenization.transcript import Outcome, TranscriptEncoder
from app.tools import assets
from gpu_kernels import is_available, unavailable_reason
from gpu_kernels.backend import CupyBackend
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.device_encoder import DeviceEncoder
from loadtest.agent_sessions.session import corpus
from loadtest.bench_gpu_twin import best_of

_COLUMNS = ("ref enc", "ref fast", "cpu chunks", "gpu", "host")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chars", default="1000000,4000000")
    parser.add_argument("--tokenizers", default="llama3,qwen3,gpt2,o200k,deepseek_v3")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="kernel times per row")
    args = parser.parse_args()
    gpu = is_available()
    if not gpu:
        print(f"no GPU path ({unavailable_reason()}): the CPU columns only")
    paths = assets.fetch()
    table = ClassTable()
    cores = len(os.sched_getaffinity(0))
    print(f"MB/s (UTF-8 bytes) per column; {cores} cores for cpu chunks")
    header = "".join(f"{c:>11}" for c in _COLUMNS)
    print(f"{'tokenizer':<10}{'chars':>10}{header}{'gpu GB/s':>10}{'gpu/enc':>9}{'gpu/chunks':>11}")
    for name in args.tokenizers.split(","):
        tokenizer = Tokenizer.from_file(str(paths[name]))
        encoder = DeviceEncoder(tokenizer, classes=table) if gpu else None
        cpu = TranscriptEncoder.from_file(paths[name], gpu_cold_start=0)
        variants = [(name, False)] + ([(name + "+nfc", True)] if tokenizer.normalizer else [])
        for label, nfc in variants:
            for chars in map(int, args.chars.split(",")):
                text = corpus(11, chars)
                text = unicodedata.normalize("NFC", text) if nfc else text
                seconds = _measure(tokenizer, encoder, cpu, text, args.repeat)
                mb = len(text.encode()) / 1e6
                rates = "".join(f"{mb / t:>11.1f}" if t else f"{'-':>11}" for t in seconds)
                ratios = (
                    f"{mb / seconds[3] / 1e3:>10.3f}{seconds[0] / seconds[3]:>8.0f}x"
                    f"{seconds[2] / seconds[3]:>10.1f}x"
                    if seconds[3]
                    else f"{'-':>10}{'-':>9}{'-':>11}"
                )
                print(f"{label:<10}{chars:>10,}{rates}{ratios}")
            if args.profile and gpu:
                _profile(tokenizer, table, text)


def _measure(
    tokenizer: Tokenizer,
    encoder: DeviceEncoder | None,
    cpu: TranscriptEncoder,
    text: str,
    repeat: int,
) -> tuple[float, ...]:
    """Best seconds per column (0: no GPU to measure it on)."""
    expected = tokenizer.encode(text, add_special_tokens=False).ids

    def cold_start() -> Outcome:
        return cpu.outcome(text, text.encode("utf-8"), None, None)

    if cold_start().state.ids.tolist() != expected:
        raise SystemExit("the CPU cold start's ids differ from the reference")
    seconds = (
        best_of(repeat, lambda: tokenizer.encode(text, add_special_tokens=False)),
        best_of(repeat, lambda: tokenizer.encode_batch_fast([text], add_special_tokens=False)),
        best_of(repeat, cold_start),
    )
    if encoder is None:
        return (*seconds, 0.0, 0.0)
    if encoder.encode(text).tolist() != expected:
        raise SystemExit("the device's ids differ from the reference")
    return (
        *seconds,
        best_of(repeat, lambda: encoder.encode(text)),
        best_of(repeat, lambda: encoder.plan.split.payload(text)),
    )


class _Timed:
    """A backend that times each kernel, the device synchronised before and after it."""

    def __init__(self) -> None:
        self._inner = CupyBackend()
        self.xp = self._inner.xp
        self.seconds: Counter[str] = Counter()

    def launch(self, name: str, grid: int, block: int, args: tuple[Any, ...]) -> None:
        self.xp.cuda.Device().synchronize()
        start = time.perf_counter()
        self._inner.launch(name, grid, block, args)
        self.xp.cuda.Device().synchronize()
        self.seconds[name] += time.perf_counter() - start

    def to_host(self, array: Any) -> npt.NDArray[Any]:
        return self._inner.to_host(array)


def _profile(tokenizer: Tokenizer, table: ClassTable, text: str) -> None:
    timed = _Timed()
    encoder = DeviceEncoder(tokenizer, classes=table, backend=timed)
    encoder.encode(text)
    timed.seconds.clear()
    start = time.perf_counter()
    encoder.encode(text)
    total = time.perf_counter() - start
    kernels = " ".join(f"{name} {s * 1e3:.2f}" for name, s in timed.seconds.most_common())
    rest = total - sum(timed.seconds.values())
    print(f"    ms: total {total * 1e3:.2f} = kernels [{kernels}] + the rest {rest * 1e3:.2f}")
    # The rest by host function (CuPy's array operations include their waits for the device),
    # measured on an encode with no synchronisation added.
    plain = DeviceEncoder(tokenizer, classes=table)
    plain.encode(text)
    profile = cProfile.Profile()
    profile.runcall(plain.encode, text)
    pstats.Stats(profile).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
