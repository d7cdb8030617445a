"""The longest the GIL is held while a worker thread encodes one piece with the reference:
in-thread against through the child process (``app/tokenization/reference_process``).

    python loadtest/reference_process_cost.py [--tokenizer .assets/smollm2]
                                              [--sizes 262144,1048576,10000000] [--rounds 3]

For each size, two texts with that many characters: the one word ``'a' * size`` and ordinary
prose (a sentence repeated).  Each is encoded by a ``ReferenceEncoder`` with no child and by
one that hands every text to its child, alternating ``--rounds`` times, while the main thread
sleeps 1 ms at a time and records the longest it waited past its wake-up (what an event loop
would wait).  Printed per row: the median of each path's worst wait and its wall time.  The
child is started (and its tokenizer loaded) before the first timed round; ids are checked
equal.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from app.main import GIL_SWITCH_S
from app.tokenization.reference import IdArray, ReferenceEncoder

PROSE = "The quick brown fox, 42 times, jumps over the lazy dog's fence; then it naps.\n"


def worst_wait(encoder: ReferenceEncoder, text: str) -> tuple[float, float, IdArray]:
    """(longest oversleep of a 1 ms sleep meanwhile, the encode's wall time, its ids)."""
    found: list[IdArray] = []
    worker = threading.Thread(target=lambda: found.append(encoder.encode(text)[0]))
    started = time.perf_counter()
    worker.start()
    worst = 0.0
    while worker.is_alive():
        before = time.perf_counter()
        time.sleep(0.001)
        worst = max(worst, time.perf_counter() - before - 0.001)
    worker.join()
    return worst, time.perf_counter() - started, found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", type=Path, default=Path(".assets/smollm2"))
    parser.add_argument("--sizes", default="262144,1048576,10000000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.setswitchinterval(GIL_SWITCH_S)  # as the proxy runs
    path = args.tokenizer / "tokenizer.json" if args.tokenizer.is_dir() else args.tokenizer
    tokenizer = Tokenizer.from_file(str(path))
    here = ReferenceEncoder(tokenizer, process_chars=None)
    child = ReferenceEncoder(tokenizer, process_chars=1)
    child.encode("warm up")
    for size in map(int, args.sizes.split(",")):
        for kind, text in (
            ("word", "a" * size),
            ("prose", (PROSE * (size // len(PROSE) + 1))[:size]),
        ):
            figures: dict[str, list[tuple[float, float]]] = {"thread": [], "child": []}
            for _ in range(args.rounds):
                expected = None
                for name, encoder in (("thread", here), ("child", child)):
                    worst, wall, ids = worst_wait(encoder, text)
                    assert expected is None or np.array_equal(ids, expected), "ids differ"
                    expected = ids
                    figures[name].append((worst, wall))
            row = "   ".join(
                f"{name}: worst wait {statistics.median(w for w, _ in runs) * 1000:6.1f} ms, "
                f"wall {statistics.median(t for _, t in runs):5.2f} s"
                for name, runs in figures.items()
            )
            print(
                f"{size:>9,} chars {kind:5s}  {row}   load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
