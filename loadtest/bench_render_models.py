"""Continuation render time per model's real chat template, memoized against a full render.

    .venv/bin/python loadtest/bench_render_models.py [--chars 100000] [--calls 8] [--seeds 3]
                                                     [--models all|qwen3-coder,gpt-oss,...]
                                                     [--clock wall|cpu]

For each model of ``bench_models.MODELS`` (its template file with its tokenizer's special
tokens), ``--seeds`` agent sessions in the model's shape (``bench_models``' bodies: the call
just under ``--chars`` characters, then ``--calls`` continuations) are rendered call after call
in one session of a ``RenderCache`` (``memo``: what the proxy does) and each call also without
one (``full``: a fresh render, which is what a template whose loops the memo cannot replay
costs). Every memoized result is checked against the full one. Printed per model: the p50 of
a session's first call (memoized: the memo is empty, so it renders in full and keeps what the
next call replays), the p50 of the continuations' render times both ways, and how many of the
last call's loop iterations were replayed. ``--clock cpu`` times the process's CPU time
(``time.process_time``) rather than the wall clock, for a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.rendering import ChatTemplate, RenderCache
from app.sessions.registry import SessionRegistry
from loadtest.bench_models import MODELS, _files
from loadtest.replay import _timed_bodies

MACRO_TEMPLATES = "qwen3-coder,qwen3.5,glm-4.7,gpt-oss,minimax-m2,gemma-4"


def bench(name: str, chars: int, calls: int, seeds: int, clock: Callable[[], float]) -> str:
    model = MODELS[name]
    folder, template_file = _files(model)
    if template_file is None:
        template = ChatTemplate.load(folder)
    else:
        template = ChatTemplate.load(template_file, tokenizer_file=folder / "tokenizer.json")
    times: dict[str, list[float]] = {"memo": [], "full": [], "first": []}
    replayed = ""
    for seed in range(seeds):
        bodies = _timed_bodies(seed + 11, chars, calls, False, "chat", model.shape)[0]
        cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
        for k, raw in enumerate(bodies):
            got: dict[str, str] = {}
            for way in ("memo", "full")[:: 1 if k % 2 else -1]:  # each first every other call
                body = json.loads(raw)
                memo = {"cache": cache, "session": "s"} if way == "memo" else {}
                t0 = clock()
                got[way] = template.render(body["messages"], tools=body["tools"], **memo)
                elapsed = clock() - t0
                if k:
                    times[way].append(elapsed)
                elif way == "memo":  # the first call of a session, which warms the memo
                    times["first"].append(elapsed)
            if got["memo"] != got["full"]:
                raise SystemExit(f"{name}: the memoized render differs from the full one")
        memos = cache._memos.get("s") or {}
        runs = [run for memo in memos.values() for run in memo.runs.values()]
        replayed = ", ".join(f"{run.replayed}/{len(run.items)}" for run in runs) or "none"
    p50 = {way: statistics.median(spent) * 1e3 for way, spent in times.items()}
    return (
        f"{name:18s} render p50: first call {p50['first']:6.2f} ms; continuation: memo "
        f"{p50['memo']:6.2f} ms, full {p50['full']:6.2f} ms ({len(times['memo'])} calls, "
        f"{len(got['full']):,} chars; last call's loops replayed {replayed})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--models", default=MACRO_TEMPLATES, help="names of bench_models.MODELS")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    for name in MODELS if args.models == "all" else args.models.split(","):
        clock = time.perf_counter if args.clock == "wall" else time.process_time
        print(bench(name, args.chars, args.calls, args.seeds, clock), flush=True)


if __name__ == "__main__":
    main()
