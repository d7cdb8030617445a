"""``bench_cold_start.py --engines``: encoders side by side on the same texts (see there)."""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from loadtest.peer_encoders import Ids, Peer, bpe_qwen_peer, tiktoken_peer


def engine_rows(args: argparse.Namespace, transcript: Callable[[str, int], str]) -> bool:
    """One row per tokenizer, size and engine; True if the reference or the native encoder
    gave other ids than the reference's."""
    from app.tokenization.boundaries import CutRules
    from app.tokenization.chunked import ChunkedEncoder
    from app.tokenization.native.encoder import NativeEncoder
    from app.tokenization.reference import ReferenceEncoder
    from app.tokenizer_spec import load_spec
    from app.tools import assets
    from tests.adversarial_strings import adversarial_strings

    paths = assets.fetch()
    cores = len(os.sched_getaffinity(0))
    print(f"cores: {cores}; {args.adversarial} adversarial strings per tokenizer")
    print(
        "| tokenizer | MB | engine | 1 thread ms | MB/s | x ref | all cores ms | MB/s "
        "| divergences |\n|---|---|---|---|---|---|---|---|---|"
    )
    failed = False
    strings = adversarial_strings(22, args.adversarial)
    for name in args.tokenizers.split(","):
        reference = ReferenceEncoder.from_file(paths[name])
        native = NativeEncoder(reference)
        rules = CutRules(load_spec(paths[name]))
        chunked = ChunkedEncoder(reference, rules, args.chunk)
        parallel = ChunkedEncoder(reference, rules, args.chunk, native)
        engines = _ours(reference, native)
        for label, peer in (
            ("tiktoken", tiktoken_peer(name, paths[name].parents[1])),
            ("bpe-qwen", bpe_qwen_peer(name, paths[name])),
        ):
            if peer is not None:
                engines[label] = peer
        expected = [e.ids for e in reference.tokenizer.encode_batch_fast(strings, False)]
        before = sum(native.stats()["declined"].values())
        wrong = {
            label: sum(peer.one(s) != want for s, want in zip(strings, expected, strict=True))
            for label, peer in engines.items()
        }
        declined = sum(native.stats()["declined"].values()) - before
        failed |= wrong["reference"] > 0 or wrong["native"] > 0
        for size in (int(s) for s in args.sizes.split(",")):
            text = transcript(name, size)
            data = text.encode("utf-8")
            want = reference.tokenizer.encode(text, add_special_tokens=False).ids
            cuts = chunked.cuts(data)
            parts = [data[a:b].decode() for a, b in itertools.pairwise(cuts)]
            one: dict[str, list[float]] = {label: [] for label in engines}
            many: dict[str, list[float]] = {label: [] for label in engines}
            differ: set[str] = set()
            for _ in range(args.repeat):
                for label, peer in engines.items():
                    started = time.perf_counter()
                    ids = peer.one(text)
                    one[label].append(time.perf_counter() - started)
                    started = time.perf_counter()
                    if label == "reference" or label == "native":
                        encoder = parallel if label == "native" else chunked
                        batch = encoder.encode(data, text).ids.tolist()
                    elif peer.many is not None:
                        batch = [i for part in peer.many(parts) for i in part]
                    else:
                        batch = want
                    many[label].append(time.perf_counter() - started)
                    if ids != want or batch != want:
                        differ.add(label)
            failed |= bool({"reference", "native"} & differ)
            base = statistics.median(one["reference"])
            for label in engines:
                single, multi = statistics.median(one[label]), statistics.median(many[label])
                note = f"{wrong[label]}/{len(strings)}"
                if label == "native":
                    note += f" ({declined} declined to the reference)"
                if label in differ:
                    note += "; ids differ on this text"
                print(
                    f"| {name} | {len(data) / 1e6:.2f} | {label} | {single * 1e3:.0f} "
                    f"| {len(data) / single / 1e6:.1f} | {base / single:.1f} "
                    f"| {multi * 1e3:.0f} | {len(data) / multi / 1e6:.1f} | {note} |",
                    flush=True,
                )
    return failed


def _ours(reference: Any, native: Any) -> dict[str, Peer]:
    """The reference and the native encoder (the reference where it declines) as peers."""

    def native_one(text: str) -> Ids:
        found = native.encode(text)
        return (found or reference.encode(text))[0].tolist()  # type: ignore[no-any-return]

    return {
        "reference": Peer(lambda text: reference.encode(text)[0].tolist(), None),
        "native": Peer(native_one, None),
    }
