"""The piece-start stage on the GPU against the twin and the reference pre-tokenizer, one run.

    python loadtest/bench_gpu_predicate.py [--chars 1000000,4000000] [--tokenizer llama3]

For each size one generated agent transcript (loadtest/agent_sessions ``corpus``) is
classified once on the host; then timed (best of 3): the reference's own pre-tokenizer
(``pre_tokenize_str``, one thread, it also slices the pieces), the twin's NumPy predicate, and
the CuPy predicate end to end (class arrays to the device, kernel + scans, flags back; the
kernel compile is warmed up first).  The flags are checked equal to the twin's.  Only the
predicate stage exists on the device so far: these are stage figures, not end-to-end ids.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from tokenizers import Tokenizer

from app import assets
from gpu_kernels import is_available, unavailable_reason
from gpu_kernels.char_classes import ClassTable, code_points
from gpu_kernels.cupy_predicate import cl100k_starts_on_device
from gpu_kernels.piece_starts import cl100k_starts
from loadtest.agent_sessions.session import corpus
from loadtest.bench_gpu_twin import best_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chars", default="1000000,4000000")
    parser.add_argument("--tokenizer", default="llama3", help="a cl100k-family asset")
    args = parser.parse_args()
    if not is_available():
        raise SystemExit(f"no GPU path: {unavailable_reason()}")
    pre = Tokenizer.from_file(str(assets.fetch()[args.tokenizer])).pre_tokenizer
    table = ClassTable()
    print(f"{'chars':>10} {'MB':>6} {'reference':>12} {'twin':>12} {'gpu':>12} {'gpu/ref':>8}")
    for chars in map(int, args.chars.split(",")):
        text = corpus(11, chars)
        ref, twin, gpu = _measure(pre, table, text)
        mb = len(text.encode()) / 1e6
        rates = "".join(f"{mb / t:>7.1f} MB/s" for t in (ref, twin, gpu))
        print(f"{chars:>10,} {mb:>6.2f} {rates} {ref / gpu:>7.1f}x")


def _measure(pre: Any, table: ClassTable, text: str) -> tuple[float, float, float]:
    """Seconds for: reference pre-tokenizer, twin predicate, device predicate (with copies)."""
    classes, folds = table.lookup(code_points(text))
    expected = cl100k_starts(classes, folds, digits_per_piece=3)
    if not np.array_equal(cl100k_starts_on_device(classes, folds, digits_per_piece=3), expected):
        raise SystemExit("the device flags differ from the twin's")
    return (
        best_of(3, lambda: pre.pre_tokenize_str(text)),
        best_of(3, lambda: cl100k_starts(classes, folds, digits_per_piece=3)),
        best_of(3, lambda: cl100k_starts_on_device(classes, folds, digits_per_piece=3)),
    )


if __name__ == "__main__":
    main()
