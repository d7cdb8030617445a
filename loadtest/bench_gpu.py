"""The GPU path against the reference and the twin, measured in one run (needs a GPU).

    python loadtest/bench_gpu.py [--chars 1000000,4000000] [--tokenizer llama3]

For each size one generated agent transcript (loadtest/agent_sessions ``corpus``), best of 3:

* predicate stage: the reference's own pre-tokenizer (``pre_tokenize_str``, one thread, it
  also slices the pieces), the twin's NumPy predicate, the CuPy predicate with its copies;
* end to end (ids): the reference's ``encode`` and ``encode_batch_fast([text])`` (one thread
  each), the twin, and ``device_encoder`` (predicate and BPE kernels; added tokens, classes,
  distinct pieces and the gather still on the host), both with the piece cache off.

Kernels are compiled and class blocks probed before timing; every result is checked equal.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from tokenizers import Tokenizer

from app import assets
from app.tokenization.spec import spec_from_json
from gpu_kernels import TwinEncoder, is_available, unavailable_reason
from gpu_kernels.char_classes import ClassTable, code_points
from gpu_kernels.cupy_predicate import cl100k_starts_on_device
from gpu_kernels.device_encoder import device_encoder
from gpu_kernels.piece_starts import DIGITS_PER_PIECE, cl100k_starts
from loadtest.agent_sessions.session import corpus
from loadtest.bench_gpu_twin import best_of

_COLUMNS = ("ref pre", "twin pre", "gpu pre", "ref enc", "ref fast", "twin", "gpu", "gpu/fast")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chars", default="1000000,4000000")
    parser.add_argument("--tokenizer", default="llama3", help="a cl100k-family asset")
    args = parser.parse_args()
    if not is_available():
        raise SystemExit(f"no GPU path: {unavailable_reason()}")
    tokenizer = Tokenizer.from_file(str(assets.fetch()[args.tokenizer]))
    family = spec_from_json(json.loads(tokenizer.to_str())).family
    if family not in DIGITS_PER_PIECE:
        raise SystemExit(f"{args.tokenizer} is not a cl100k-family tokenizer")
    per_piece = DIGITS_PER_PIECE[family]
    table = ClassTable()
    print("MB/s per column; gpu/fast = end-to-end speed-up over encode_batch_fast")
    print(f"{'chars':>10}" + "".join(f"{c:>10}" for c in _COLUMNS))
    for chars in map(int, args.chars.split(",")):
        text = corpus(11, chars)
        stage = _predicate_stage(tokenizer, table, text, per_piece)
        seconds = stage + _end_to_end(tokenizer, table, text)
        mb = len(text.encode()) / 1e6
        rates = "".join(f"{mb / t:>10.2f}" for t in seconds)
        print(f"{chars:>10,}{rates}{seconds[4] / seconds[6]:>9.2f}x")


def _predicate_stage(
    tokenizer: Tokenizer, table: ClassTable, text: str, per_piece: int
) -> tuple[float, ...]:
    classes, folds = table.lookup(code_points(text))
    expected = cl100k_starts(classes, folds, digits_per_piece=per_piece)
    got = cl100k_starts_on_device(classes, folds, digits_per_piece=per_piece)
    if not np.array_equal(got, expected):
        raise SystemExit("the device flags differ from the twin's")
    pre = tokenizer.pre_tokenizer
    return (
        best_of(3, lambda: pre.pre_tokenize_str(text)),
        best_of(3, lambda: cl100k_starts(classes, folds, digits_per_piece=per_piece)),
        best_of(3, lambda: cl100k_starts_on_device(classes, folds, digits_per_piece=per_piece)),
    )


def _end_to_end(tokenizer: Tokenizer, table: ClassTable, text: str) -> tuple[float, ...]:
    expected = tokenizer.encode(text, add_special_tokens=False).ids
    twin = TwinEncoder(tokenizer, classes=table, cache_bytes=0)
    gpu = device_encoder(tokenizer, classes=table, cache_bytes=0)
    for encoder in (twin, gpu):
        if encoder.encode(text).tolist() != expected:
            raise SystemExit("ids differ from the reference")
    return (
        best_of(3, lambda: tokenizer.encode(text, add_special_tokens=False)),
        best_of(3, lambda: tokenizer.encode_batch_fast([text], add_special_tokens=False)),
        best_of(3, lambda: twin.encode(text)),
        best_of(3, lambda: gpu.encode(text)),
    )


if __name__ == "__main__":
    main()
