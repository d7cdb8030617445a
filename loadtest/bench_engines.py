"""``bench_cold_start.py --engines``: encoders side by side on the same texts (see there)."""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from loadtest.peer_encoders import (
    Ids,
    Peer,
    bpe_qwen_peer,
    fastokens_peer,
    gigatoken_peer,
    tiktoken_peer,
)

if TYPE_CHECKING:
    from app.tokenization.native.encoder import NativeEncoder
    from app.tokenization.reference import IdArray, ReferenceEncoder


def engine_rows(args: argparse.Namespace, transcript: Callable[[str, int], str]) -> bool:
    """One row per tokenizer, text, size and engine, then the one-core summary (CPU MB/s of
    the largest size per text); True if the reference or the native encoder gave other ids
    than the reference's."""
    from app.tokenization.boundaries import CutRules
    from app.tokenization.chunked import ChunkedEncoder
    from app.tokenization.native.encoder import NativeEncoder
    from app.tokenization.reference import ReferenceEncoder
    from app.tokenizer_spec import load_spec
    from app.tools import assets
    from tests.adversarial_strings import adversarial_strings

    cores = len(os.sched_getaffinity(0))
    print(f"cores: {cores}; {args.adversarial} adversarial strings per tokenizer")
    print(
        "| tokenizer | text | MB | engine | threads | wall ms | MB/s | x ref | CPU ms | CPU MB/s "
        "| CPU x ref | divergences |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    failed = False
    strings = adversarial_strings(22, args.adversarial)
    kinds = args.texts.split(",")
    summary: dict[tuple[str, str], dict[str, float]] = {}
    notes: dict[tuple[str, str], list[str]] = {}
    for name in args.tokenizers.split(","):
        path = assets.tokenizer_file(name)
        reference = ReferenceEncoder.from_file(path)
        native = NativeEncoder(reference)
        rules = CutRules(load_spec(path))
        chunked = ChunkedEncoder(reference, rules, args.chunk)
        parallel = ChunkedEncoder(reference, rules, args.chunk, native)
        engines = _ours(reference, native)
        for label, peer in (
            ("fastokens", fastokens_peer(path)),
            ("gigatoken", gigatoken_peer(path)),
            ("tiktoken", tiktoken_peer(name, path.parents[1])),
            ("bpe-qwen", bpe_qwen_peer(name, path)),
        ):
            if peer is not None:
                engines[label] = peer
        expected = [
            e.ids for e in reference.tokenizer.encode_batch_fast(strings, add_special_tokens=False)
        ]
        before = sum(native.stats()["declined"].values())
        wrong = {
            label: sum(
                _listed(peer.one(s)) != want for s, want in zip(strings, expected, strict=True)
            )
            for label, peer in engines.items()
        }
        declined = sum(native.stats()["declined"].values()) - before
        failed |= wrong["reference"] > 0 or wrong["native"] > 0
        for kind, size in itertools.product(kinds, (int(s) for s in args.sizes.split(","))):
            text = _text(kind, name, size, transcript)
            data = text.encode("utf-8")
            want = reference.tokenizer.encode(text, add_special_tokens=False).ids
            cuts = chunked.cuts(data)
            parts = [data[a:b].decode() for a, b in itertools.pairwise(cuts)]
            one: dict[str, list[_Took]] = {label: [] for label in engines}
            many: dict[str, list[_Took]] = {label: [] for label in engines}
            differ: set[str] = set()
            for _ in range(args.repeat):
                for label, peer in engines.items():
                    time.sleep(args.idle)
                    took = _Took.start()
                    ids = peer.one(text)
                    one[label].append(took.stop())
                    time.sleep(args.idle)
                    took = _Took.start()
                    batch: Ids = want
                    if label in _OURS:
                        encoder = chunked if label == "reference" else parallel
                        batch = _OURS[label](encoder.encode(data, text).ids)
                    elif peer.many is not None:
                        batch = [i for part in peer.many(parts) for i in part]
                    many[label].append(took.stop())
                    if _listed(ids) != want or _listed(batch) != want:
                        differ.add(label)
            failed |= bool({"reference", "native"} & differ)
            base = _Took.median(one["reference"])
            for label in engines:
                note = f"{wrong[label]}/{len(strings)}"
                if label == "native":
                    note += f" ({declined} declined to the reference)"
                if label in differ:
                    note += "; ids differ on this text"
                for threads, times in (("1", one[label]), (f"all {cores}", many[label])):
                    row = _Took.median(times).cells(base, len(data))
                    row = (
                        f"| {name} | {kind} | {len(data) / 1e6:.2f} | {label} | {threads} | {row} |"
                    )
                    print(row, note, "|", flush=True)
                cpu = _Took.median(one[label]).cpu
                summary.setdefault((name, label), {})[kind] = len(data) / cpu / 1e6
                found = notes.setdefault((name, label), [note.split(";")[0]])
                if label in differ:
                    found.append(f"ids differ on {kind} {size:,}")
        for size in (int(s) for s in args.one_piece.split(",") if s):
            failed |= _one_piece(name, reference, native, size)
    print(f"\none core (CPU time of one encode, median of {args.repeat}), MB/s of UTF-8:")
    print(f"| tokenizer | engine | {' | '.join(kinds)} | divergences |")
    print("|---" * (len(kinds) + 3) + "|")
    for (name, label), speeds in summary.items():
        cells = " | ".join(f"{speeds[k]:.1f}" for k in kinds)
        print(f"| {name} | {label} | {cells} | {'; '.join(notes[name, label])} |")
    return failed


def _text(kind: str, name: str, size: int, transcript: Callable[[str, int], str]) -> str:
    """``size`` characters of a text kind: ``transcript`` (an agent session of the
    tokenizer's markup), ``source`` (the standard library's Python source, its files in name
    order) or ``multilingual`` (the pools' sentences in eleven languages, Vietnamese
    decomposed, in a seeded random order, a space or a newline between them)."""
    if kind == "transcript":
        return transcript(name, size)
    parts: list[str] = []
    if kind == "source":
        folder = Path(os.__file__).parent
        files = iter(sorted(folder.glob("*.py")))
        while sum(map(len, parts)) < size:
            parts.append(next(files).read_text(encoding="utf-8", errors="replace"))
        return "".join(parts)[:size]
    if kind != "multilingual":
        raise SystemExit(f"unknown text kind {kind!r} (transcript, source, multilingual)")
    from loadtest.agent_sessions.vocabulary import FOREIGN

    draw, total = random.Random(38), 0
    while total < size:
        parts.append(draw.choice(FOREIGN) + draw.choice(" \n"))
        total += len(parts[-1])
    return "".join(parts)[:size]


class _Took(NamedTuple):
    """Seconds of one encode: wall clock, and CPU (all of the process's threads), which a
    loaded machine's waits leave out: the single-core figure to read there."""

    wall: float
    cpu: float

    @staticmethod
    def start() -> _Took:
        return _Took(time.perf_counter(), time.process_time())

    def stop(self) -> _Took:
        return _Took(time.perf_counter() - self.wall, time.process_time() - self.cpu)

    @staticmethod
    def median(took: list[_Took]) -> _Took:
        return _Took(
            statistics.median(t.wall for t in took), statistics.median(t.cpu for t in took)
        )

    def cells(self, base: _Took, size: int) -> str:
        """Wall ms, MB/s and the reference's one-thread time over it, then the same of CPU."""
        return " | ".join(
            f"{t * 1e3:.0f} | {size / t / 1e6:.1f} | {b / t:.1f}"
            for t, b in ((self.wall, base.wall), (self.cpu, base.cpu))
        )


_OURS: dict[str, Callable[[IdArray], Ids]] = {
    "reference": lambda ids: ids,
    "native": lambda ids: ids,
    "native, ids as a list": lambda ids: ids.tolist(),
}
"""Our engines, and the form each gives its ids in (all cores: ``ChunkedEncoder``'s int32
array).  The proxy keeps the native encoder's array and writes its JSON from it; the last row
adds the Python list that the reference (``Encoding.ids``) and the peers give."""


def _ours(reference: ReferenceEncoder, native: NativeEncoder) -> dict[str, Peer]:
    """The reference (Hugging Face's fastest call for one text: ``encode_batch_fast`` of one,
    no offsets, on one thread) and the native encoder (the reference where it declines)."""

    def native_one(text: str) -> IdArray:
        return (native.encode(text) or reference.encode(text))[0]

    return {
        "reference": Peer(
            lambda text: (
                reference.tokenizer.encode_batch_fast([text], add_special_tokens=False)[0].ids
            ),
            None,
        ),
        "native": Peer(native_one, None),
        "native, ids as a list": Peer(lambda text: native_one(text).tolist(), None),
    }


def _one_piece(name: str, reference: ReferenceEncoder, native: NativeEncoder, size: int) -> bool:
    """``'a' * size``, one piece the merge must take in order: the native encoder's CPU time
    (the reference's too up to 1M characters); True if their ids differ."""
    text = "a" * size
    took = _Took.start()
    found = native.encode(text)
    mine = took.stop().cpu
    theirs = ""
    if size <= 1_000_000:
        took = _Took.start()
        want = reference.encode(text)[0]
        theirs = f", reference {took.stop().cpu * 1e3:.0f} ms"
        if found is None or not np.array_equal(found[0], want):
            print(f"MISMATCH: {name} 'a' * {size}")
            return True
    print(f"{name}: 'a' * {size:,}: native {mine * 1e3:.0f} ms of CPU{theirs}", flush=True)
    return False


def _listed(ids: Ids) -> list[int]:
    """Ids as a list, to compare (outside the timing)."""
    return ids if isinstance(ids, list) else np.asarray(ids).tolist()
