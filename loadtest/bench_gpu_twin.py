"""Throughput of the GPU path's NumPy twin against the reference encoder, measured in one run.

    python loadtest/bench_gpu_twin.py [--tokenizers qwen3,llama3,cl100k] [--chars 1000000]

The twin runs the GPU algorithm's stages (class lookup, piece-start predicate, compaction, BPE
merge rounds) with NumPy on one CPU core: it is the proof of the algorithm, not a fast path,
and is expected to be no faster than the Rust reference.  Each tokenizer encodes one generated
agent transcript (loadtest/agent_sessions ``corpus``) cold (fresh twin: class blocks probed and
piece cache empty) and warm (same twin again), against the reference in the same run: its
``encode`` (with offsets) and ``encode_batch_fast([text])`` (no offsets, what toksplice's
reference encoder calls), both single-threaded for one text; the ids are checked equal.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tokenizers import Tokenizer

from app.tools import assets
from gpu_kernels import TwinEncoder
from loadtest.agent_sessions.session import corpus


def best_of(runs: int, call: Callable[[], object]) -> float:
    """Best wall-clock seconds of ``runs`` calls (device work included: callers sync)."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizers", default="qwen3,llama3,cl100k")
    parser.add_argument("--chars", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    paths = assets.fetch()
    text = corpus(args.seed, args.chars)
    mb = len(text.encode()) / 1e6
    print(f"{args.chars:,} chars ({mb:.2f} MB UTF-8), seed {args.seed}")
    columns = ("encode", "batch_fast", "twin cold", "twin warm")
    print(f"{'MB/s':<10}" + "".join(f"{c:>11}" for c in columns) + f"{'warm/fast':>11}")
    for name in args.tokenizers.split(","):
        seconds = _measure(Tokenizer.from_file(str(paths[name])), text)
        rates = "".join(f"{mb / t:>11.2f}" for t in seconds)
        print(f"{name:<10}{rates}{seconds[1] / seconds[3]:>10.2f}x")


def _measure(tokenizer: Tokenizer, text: str) -> tuple[float, float, float, float]:
    """Seconds for: reference encode, reference encode_batch_fast, twin cold, twin warm."""
    start = time.perf_counter()
    twin = TwinEncoder(tokenizer)
    ids = twin.encode(text).tolist()
    cold = time.perf_counter() - start
    if ids != tokenizer.encode(text, add_special_tokens=False).ids:
        raise SystemExit("the twin's ids differ from the reference")
    warm = best_of(3, lambda: twin.encode(text))
    ref = best_of(3, lambda: tokenizer.encode(text, add_special_tokens=False))
    fast = best_of(3, lambda: tokenizer.encode_batch_fast([text], add_special_tokens=False))
    return ref, fast, cold, warm


if __name__ == "__main__":
    main()
