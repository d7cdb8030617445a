"""Incremental BPE against HF tokenizers and tiktoken, all figures from one run.

    python loadtest/bench_incremental_bpe.py [--family cl100k] [--max-power 22] [--repeat 3]

1. Preprocessing of a 150K vocabulary (qwen3, 151,643 tokens): tables built from the
   tokenizer.json, then loaded from the disk cache keyed by the file's SHA-256.
2. 'a' * 2^k, k = 10..max-power: MB/s of the incremental BPE (eager and not), HF's BPE model on
   the same bytes (no pre-split, the same output), and tiktoken (its regex leaves one piece, so
   the same BPE work; sizes past --tiktoken-budget seconds are not run).  Flatness = the
   incremental BPE's fastest size over its slowest.
3. Prose (README.md) and code (app/**/*.py), repeated to ~1 MB: the same columns, plus HF's
   full tokenizer (pre-split; different output, for scale).  Eager overhead = time with eager
   output over time without, minus one.
4. Session appends for Mistral v3 (SentencePiece BPE, no pre-split): a chat-shaped transcript
   grown to each size, then ~1.4 KB appends through ``SessionTokenizer`` (the incremental BPE
   path) against a full reference encode of the same text.

Single thread.  Times are CPU seconds of this process (``time.process_time``), each the best
of --repeat runs over at least 4 MiB (small inputs are run several times), so that a shared
machine's scheduling does not enter the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tiktoken
from tokenizers import Tokenizer

from app.sessions import SessionTokenizer
from app.tokenization.incremental_bpe import IncrementalBPE
from app.tools import assets
from loadtest.bpe_reference import reference_bpe

ROOT = Path(__file__).resolve().parents[1]
TIKTOKEN_NAMES = {"cl100k": "cl100k_base", "o200k": "o200k_base"}


def best_seconds(run: Callable[[], object], size: int, repeat: int) -> float:
    """CPU seconds of one run on ``size`` bytes: best of ``repeat``, each over >= 4 MiB."""
    loops = max(1, (4 << 20) // size)
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(loops):
            run()
        best = min(best, (time.process_time() - start) / loops)
    return best


def incremental(engine: IncrementalBPE, data: bytes, eager: bool) -> list[int]:
    state = engine.start(eager=eager)
    return state.feed(data) + state.pending()


def preprocessing(paths: dict[str, Path]) -> None:
    with tempfile.TemporaryDirectory() as cache:
        start = time.process_time()
        IncrementalBPE.from_file(paths["qwen3"], cache_dir=Path(cache))
        built = time.process_time() - start
        start = time.process_time()
        IncrementalBPE.from_file(paths["qwen3"], cache_dir=Path(cache))
        loaded = time.process_time() - start
    print(
        f"preprocessing qwen3 (151,643 tokens): build {built:.2f} s, cached load {loaded:.3f} s"
        " (CPU seconds)"
    )


def columns(
    engine: IncrementalBPE,
    hf_bpe: Callable[[bytes], list[int]],
    tik: tiktoken.Encoding | None,
    data: bytes,
    repeat: int,
) -> dict[str, float]:
    expected = hf_bpe(data)
    assert incremental(engine, data, True) == incremental(engine, data, False) == expected
    text = data.decode("utf-8")
    size = len(data)
    return {
        "ibpe eager": best_seconds(lambda: incremental(engine, data, True), size, repeat),
        "ibpe": best_seconds(lambda: incremental(engine, data, False), size, repeat),
        "HF BPE": best_seconds(lambda: hf_bpe(data), size, repeat),
        "tiktoken": best_seconds(lambda: tik.encode_ordinary(text), size, repeat) if tik else 0.0,
    }


def row(label: str, size: int, seconds: dict[str, float]) -> str:
    cells = [f"{size / s / 1e6:9.1f}" if s else "        -" for s in seconds.values()]
    return f"{label:>10} " + " ".join(cells)


def session_appends(path: Path, sizes: list[int], calls: int = 20) -> None:
    tok = SessionTokenizer.from_file(path)
    reference = Tokenizer.from_file(str(path))
    # a literal "▁" sends an append to the full path (see bpe_appends.py); this prose has none
    prose = (ROOT / "README.md").read_text(encoding="utf-8").replace("\u2581", "_")
    print("\nmistral_v3 session appends (ms per call, CPU)")
    print(f"{'size':>10} {'append':>9} {'full':>9}  ratio")
    for size in sizes:
        text, offset, session = "", 0, f"bench/{size}"
        while len(text) < size:
            chunk = prose[offset % len(prose) : offset % len(prose) + 1400]
            text += f"[INST] {chunk} [/INST]"
            offset += 1400
        tok.encode(text, session=session)
        appended = full = 0.0
        for _ in range(calls):
            chunk = prose[offset % len(prose) : offset % len(prose) + 1400]
            offset += 1400
            text += f"[INST] {chunk} [/INST]"
            start = time.process_time()
            enc = tok.encode(text, session=session)
            appended += time.process_time() - start
            assert enc.route == "append", enc.route
            start = time.process_time()
            expected = reference.encode(text, add_special_tokens=False).ids
            full += time.process_time() - start
        assert enc.ids.tolist() == expected
        per_call = f"{appended / calls * 1e3:9.2f} {full / calls * 1e3:9.2f}"
        print(f"{size:>10} {per_call}  {full / appended:5.0f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--family", default="cl100k", choices=sorted(TIKTOKEN_NAMES))
    parser.add_argument("--max-power", type=int, default=22)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tiktoken-budget", type=float, default=20.0)
    parser.add_argument("--session-sizes", default="100000,1000000")
    args = parser.parse_args()
    paths = assets.fetch()
    session_appends(paths["mistral_v3"], [int(s) for s in args.session_sizes.split(",")])
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(paths["cl100k"].parents[1] / "tiktoken"))
    preprocessing(paths)

    engine = IncrementalBPE.from_file(paths[args.family])
    hf_bpe = reference_bpe(paths[args.family])
    tik: tiktoken.Encoding | None = tiktoken.get_encoding(TIKTOKEN_NAMES[args.family])
    header = f"{'MB/s':>10} " + " ".join(f"{n:>9}" for n in ("ibpe+eager", "ibpe", "HF BPE"))
    print(f"\n'a' * 2^k, {args.family}\n{header}  tiktoken")
    rates = []
    for power in range(10, args.max_power + 1, 2):
        data = b"a" * (1 << power)
        seconds = columns(engine, hf_bpe, tik, data, args.repeat)
        if tik is not None and seconds["tiktoken"] > args.tiktoken_budget / args.repeat:
            tik = None  # quadratic: the next size would take four times as long
        rates.append(len(data) / seconds["ibpe eager"])
        print(row(f"2^{power}", len(data), seconds))
    print(f"flatness (eager, fastest / slowest size): {max(rates) / min(rates):.2f}x")

    tik = tiktoken.get_encoding(TIKTOKEN_NAMES[args.family])
    full = Tokenizer.from_file(str(paths[args.family]))
    prose = (ROOT / "README.md").read_bytes()
    code = b"".join(p.read_bytes() for p in sorted((ROOT / "app").rglob("*.py")))
    print(f"\n{args.family}\n{header}  tiktoken  HF full  eager overhead")
    for label, sample in (("prose", prose), ("code", code)):
        data = sample * max(1, (1 << 20) // len(sample))
        seconds = columns(engine, hf_bpe, tik, data, args.repeat)
        text = data.decode("utf-8")
        hf_full = best_seconds(
            lambda text=text: full.encode(text, add_special_tokens=False),  # type: ignore[misc]
            len(data),
            args.repeat,
        )
        overhead = seconds["ibpe eager"] / seconds["ibpe"] - 1
        print(f"{row(label, len(data), seconds)} {len(data) / hf_full / 1e6:8.1f}  {overhead:+.0%}")


if __name__ == "__main__":
    main()
