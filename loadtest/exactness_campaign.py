"""Replay generated agent sessions through SessionTokenizer and check every call's ids.

    python loadtest/exactness_campaign.py [--families qwen3,llama3,...] [--chars 300000]
                                          [--parallel-chunk 1024]

For every tokenizer family, sessions of three kinds are replayed call by call: plain appends,
Claude Code's billing-line edit at the start of every call, and Qwen3-style removal of earlier
think blocks (edits in the middle), plus keyless calls found by content.  Every call's ids are
compared with the reference encode of the whole text.  Prints checks, divergences (must be 0),
routes, first-window acceptance and the texts encoded in parallel chunks (``--parallel-chunk``:
their size; small ones chunk every cold start and most appended stretches) per family; exits
non-zero on any divergence.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.sessions import SessionTokenizer
from app.tokenization.chunked import PARALLEL_CHUNK
from app.tools import assets
from loadtest.agent_sessions import MARKUPS, session_calls

SCENARIOS = {
    "appends": {},
    "billing-line": {"billing_line": True},
    "think-drop": {"drop_thinking": True},
    "both": {"billing_line": True, "drop_thinking": True},
}


def replay(name: str, path: Path, chars: int, seeds: int, chunk: int) -> dict[str, object]:
    tok = SessionTokenizer.from_file(path, parallel_chunk=chunk)
    reference = tok.reference.tokenizer
    checks = divergences = 0
    for seed in range(seeds):
        for scenario, options in SCENARIOS.items():
            keyed = seed % 2 == 0
            for text in session_calls(
                seed, MARKUPS[name], target_chars=chars, append_chars=2300, **options
            ):
                session = f"tenant{seed}/{scenario}" if keyed else None
                enc = tok.encode(text, session=session, tenant=f"tenant{seed}")
                checks += 1
                if list(enc.ids) != reference.encode(text, add_special_tokens=False).ids:
                    divergences += 1
                    print(f"DIVERGENCE {name} seed={seed} {scenario} len={len(text)} {enc.route}")
    info = tok.explain()
    counters = info["counters"]
    return {
        "checks": checks,
        "divergences": divergences,
        "first_window": info["first_window_acceptance"],
        "routes": {k[6:]: v for k, v in sorted(counters.items()) if k.startswith("route:")},
        "fallbacks": {k[9:]: v for k, v in sorted(counters.items()) if k.startswith("fallback:")},
        "chunked": info["parallel_chunks"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--families", default=",".join(MARKUPS))
    parser.add_argument("--chars", type=int, default=300_000, help="transcript size per session")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--parallel-chunk", type=int, default=PARALLEL_CHUNK)
    args = parser.parse_args()
    paths = assets.fetch()
    total = 0
    print(
        "| family | checks | divergences | first-window acceptance | routes | fallbacks "
        "| texts in chunks / chunks | s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in args.families.split(","):
        started = time.perf_counter()
        row = replay(name, paths[name], args.chars, args.seeds, args.parallel_chunk)
        chunked = row["chunked"]
        total += int(row["divergences"])  # type: ignore[call-overload]
        print(
            f"| {name} | {row['checks']} | {row['divergences']} | {row['first_window']:.4%} "
            f"| {row['routes']} | {row['fallbacks']} "
            f"| {chunked['texts']} / {chunked['chunks']} "  # type: ignore[index]
            f"| {time.perf_counter() - started:.0f} |",
            flush=True,
        )
    print(f"total divergences: {total}")
    if total:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
