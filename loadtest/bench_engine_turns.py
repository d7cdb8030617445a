"""Cold-start engines on one core, each in a process of its own, taking turns.

    python loadtest/bench_engine_turns.py [--trees . ../base] [--peers fastokens,gigatoken]
        [--tokenizers qwen3,deepseek_v3,llama3] [--texts source,multilingual]
        [--size 1000000] [--rounds 8] [--per-turn 3]

``bench_cold_start.py --engines`` runs every engine in one process, one after the other, so
each evicts the others' tables from the caches (the native encoder's piece caches
among them): its figures move by 20% from run to run.  Here every engine is a worker process
of its own, loaded once: the native encoder of each of ``--trees`` (checkouts whose C part is
built, e.g. a worktree of the commit before: ``git worktree add ../base HEAD~1`` and
``python setup.py build_ext --inplace`` there) and each of ``--peers``
(``loadtest.peer_encoders``).  The workers take turns, ``--per-turn`` encodes of the same text
each (``bench_engines`` texts), for ``--rounds`` rounds; printed per tokenizer and text is each
one's MB/s of CPU time over its fastest turn and its median turn, and its ratio to the first
tree's.  Each worker's ids are checked against the reference's first (a mismatch exits 1).
A worker encodes one str throughout, and every engine gets its UTF-8 without encoding it:
CPython keeps a str's UTF-8 once asked for it (the reference's check asks; an ASCII str's
characters are their UTF-8), which an engine taking a str through PyO3 reads, and the native
encoder is given it made once, ``encode(text, utf8)``, the call the proxy makes (it holds the
transcript's UTF-8 before it tokenizes).  (``encode(text)`` alone copies it, ``str.encode``:
3-5% of an encode of ASCII source code.  A new str for each encode adds the UTF-8 encode to
every engine: on agent transcripts the native encoder's ratios to the peers' fell by up to a
tenth.)
``--tokenizers`` names the assets' tokenizers or the models' (``assets.tokenizer_file``:
tekken, gemma3, qwen35, gpt_oss...).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", default=".", help="checkouts whose native encoders to time")
    parser.add_argument("--peers", default="fastokens", help="peer engines, or empty")
    parser.add_argument("--tokenizers", default="qwen3,deepseek_v3,llama3")
    parser.add_argument("--texts", default="source,multilingual")
    parser.add_argument("--size", type=int, default=1_000_000, help="characters per text")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--per-turn", type=int, default=3, help="encodes per worker per turn")
    worker = ("ENGINE", "TOKENIZER", "FILE", "TEXT", "SIZE")
    parser.add_argument("--worker", nargs=5, metavar=worker, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _work(*args.worker)
        return
    from app.tools import assets

    trees = [Path(tree).resolve() for tree in args.trees.split(",")]
    peers = [peer for peer in args.peers.split(",") if peer]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.per_turn} encodes")
    print("| tokenizer | text | engine | MB/s best | MB/s median | x first tree |")
    print("|---|---|---|---|---|---|")
    for name in args.tokenizers.split(","):
        path = assets.tokenizer_file(name)  # here: a tree of an older commit may lack it
        for kind in args.texts.split(","):
            start = [(f"native {tree.name or tree}", tree, "native") for tree in trees]
            start += [(peer, trees[0], peer) for peer in peers]
            workers = {label: _start(tree, engine, name, path, kind, args.size)
                       for label, tree, engine in start}  # fmt: skip
            sizes = {label: _answer(worker) for label, worker in workers.items()}
            timed = {label: w for label, w in workers.items() if sizes[label] > 0}
            times: dict[str, list[float]] = {label: [] for label in timed}
            for _ in range(args.rounds):
                for label, worker in timed.items():
                    assert worker.stdin is not None
                    worker.stdin.write(f"{args.per_turn}\n")
                    worker.stdin.flush()
                    times[label].append(_answer(worker))
            for worker in workers.values():
                assert worker.stdin is not None
                worker.stdin.close()
                worker.wait()
            first = next(iter(workers))
            base = statistics.median(times[first]) if first in times else None
            for label in workers:
                if label not in timed:
                    print(f"| {name} | {kind} | {label} | - | - | {_MISSING[int(sizes[label])]} |")
                    continue
                best, median = (sizes[label] / f(times[label]) / 1e6 for f in _STATS)
                ratio = "-" if base is None else f"{base / statistics.median(times[label]):.2f}"
                print(f"| {name} | {kind} | {label} | {best:.1f} | {median:.1f} | {ratio} |")
            if _WRONG in sizes.values():
                sys.exit(1)


_STATS = (min, statistics.median)
_PROBE_WAITS = 100
_WRONG, _UNCOVERED, _DECLINED = -1, 0, -2
_MISSING = {
    _WRONG: "ids differ from the reference's",
    _UNCOVERED: "does not cover it",
    _DECLINED: "declined the text (the reference encodes it)",
}


def _start(
    tree: Path, engine: str, name: str, path: Path, kind: str, size: int
) -> subprocess.Popen[str]:
    command = [sys.executable, str(REPO / "loadtest" / "bench_engine_turns.py"),
               "--worker", engine, name, str(path), kind, str(size)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.Popen(command, cwd=tree, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip


def _answer(worker: subprocess.Popen[str]) -> float:
    assert worker.stdout is not None
    line = worker.stdout.readline()
    if not line:
        raise SystemExit(f"a worker exited early ({worker.args!r})")
    return float(line)


def _work(engine: str, name: str, file: str, kind: str, size: str) -> None:
    """A worker: prints the text's UTF-8 size (0: the engine does not cover the tokenizer,
    -1: its ids differ from the reference's, -2: it declined the text), then for each count
    read from stdin the CPU seconds of its fastest of that many encodes."""
    from app.tokenization.native_route import native_encoder
    from app.tokenization.reference import ReferenceEncoder
    from loadtest.bench_cold_start import _transcript
    from loadtest.bench_engines import _text
    from loadtest.peer_encoders import fastokens_peer, gigatoken_peer

    path = Path(file)
    reference = ReferenceEncoder.from_file(path)
    text = _text(kind, name, int(size), _transcript)
    encode: Callable[[str], object] | None
    if engine == "native":
        native = native_encoder(reference, "native")
        utf8 = text.encode()
        encode = None if native is None else lambda text: native.encode(text, utf8)
    else:
        peer = {"fastokens": fastokens_peer, "gigatoken": gigatoken_peer}[engine](path)
        encode = None if peer is None else peer.one
    if encode is None:
        print(_UNCOVERED, flush=True)
        return
    got = encode(text)
    for _ in range(_PROBE_WAITS):  # a short text's first encodes wait for its class blocks
        if got is not None:
            break
        time.sleep(0.1)
        got = encode(text)
    if got is None:
        print(_DECLINED, flush=True)
        return
    ids: Any = got[0] if isinstance(got, tuple) else got
    want = reference.tokenizer.encode(text, add_special_tokens=False).ids
    if list(map(int, ids)) != want:
        print(_WRONG, flush=True)
        return
    print(len(text.encode()), flush=True)
    for line in sys.stdin:
        took = []
        for _ in range(int(line)):
            start = time.process_time()
            encode(text)
            took.append(time.process_time() - start)
        print(min(took), flush=True)


if __name__ == "__main__":
    main()
