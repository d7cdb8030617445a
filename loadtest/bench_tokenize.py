"""Per-call session encode cost against the full reference encode, measured in one run.

    python loadtest/bench_tokenize.py [--tokenizer qwen3] [--sizes 100000,1000000,4000000]

For each transcript size a generated agent session (loadtest/agent_sessions/) is fed call by
call to a SessionTokenizer until it reaches the size; then the next ``--calls`` calls are timed
(diff + repair + id array, i.e. ``SessionTokenizer.encode``).  Two scenarios: plain appends, and
Claude Code's per-call billing-line edit near the start of the transcript (plus Qwen's dropped
think blocks).  The full reference encode of the same transcript is timed in the same run, so
the printed ratios hold on a noisy, shared machine.  Every timed call's ids are checked against
the reference on the last call of each size (and all calls with --verify).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.sessions import SessionTokenizer
from app.sessions.tokenizer import store_key
from app.tools import assets
from loadtest.agent_sessions import MARKUPS, session_calls

# The generator's append sizes are heavy-tailed (median ~0.6 x mean); a mean of 2300 chars
# gives the ~1.4K-char median append measured on real agent traffic.
_MEAN_APPEND = 2300
_MEDIAN_APPEND = 1400


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_size(
    name: str, path: Path, size: int, calls: int, *, edits: bool, verify: bool
) -> dict[str, float]:
    tok = SessionTokenizer.from_file(path)
    reference = tok.reference.tokenizer
    stream = session_calls(
        size,
        MARKUPS[name],
        target_chars=size * 2 + 10**6,
        append_chars=_MEAN_APPEND,
        billing_line=edits,
        drop_thinking=edits,
    )
    # Warm up to just below the size, so that the timed calls straddle it.
    start_at = size - calls * _MEDIAN_APPEND // 2
    text = ""
    for text in stream:
        tok.encode(text, session="bench/s")
        if len(text) >= start_at:
            break
    before = tok.explain()["counters"]
    timings: list[float] = []
    routes: dict[str, int] = {}
    sizes: list[int] = []
    for _ in range(calls):
        text = next(stream)
        sizes.append(len(text))
        started = time.perf_counter()
        enc = tok.encode(text, session="bench/s")
        timings.append((time.perf_counter() - started) * 1e3)
        routes[enc.route] = routes.get(enc.route, 0) + 1
        if verify:
            assert list(enc.ids) == reference.encode(text, add_special_tokens=False).ids
    full_runs = []
    for _ in range(1 if size >= 2_000_000 else 3):
        started = time.perf_counter()
        full = reference.encode(text, add_special_tokens=False).ids
        full_runs.append((time.perf_counter() - started) * 1e3)
    divergent = list(enc.ids) != full
    after = tok.explain()["counters"]
    searches = after.get("searches", 0) - before.get("searches", 0)
    accepted = after.get("first_window", 0) - before.get("first_window", 0)
    state = tok.store.get(store_key("bench/s"))
    assert state is not None
    bound = len(state.text) + 4 * len(state.ids)
    median = statistics.median(timings)
    full_ms = statistics.median(full_runs)
    return {
        "chars": statistics.median(sizes),
        "median_ms": median,
        "p99_ms": _percentile(timings, 0.99),
        "full_ms": full_ms,
        "speedup": full_ms / median,
        "first_window": accepted / searches if searches else float("nan"),
        "state_ratio": state.nbytes / bound,
        "divergent": float(divergent),
        "routes": routes,  # type: ignore[dict-item]
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokenizer", default="qwen3", choices=sorted(MARKUPS))
    parser.add_argument("--sizes", default="100000,1000000,4000000")
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--verify", action="store_true", help="check every timed call's ids")
    args = parser.parse_args()
    path = assets.fetch()[args.tokenizer]
    sizes = [int(s) for s in args.sizes.split(",")]
    header = (
        "| scenario | transcript chars (median) | median ms/call | p99 ms | full encode ms "
        "| speedup | first-window acceptance | state / (text+4B/token) | routes |"
    )
    print(f"tokenizer: {args.tokenizer} ({path})")
    print(header)
    print("|" + "---|" * 9)
    medians: dict[str, list[float]] = {}
    diverged = 0
    for edits in (False, True):
        scenario = "billing-line edit + appends" if edits else "appends"
        for size in sizes:
            row = run_size(args.tokenizer, path, size, args.calls, edits=edits, verify=args.verify)
            diverged += int(row["divergent"])
            medians.setdefault(scenario, []).append(row["median_ms"])
            print(
                f"| {scenario} | {row['chars']:,.0f} | {row['median_ms']:.2f} "
                f"| {row['p99_ms']:.2f} | {row['full_ms']:.0f} | {row['speedup']:.0f}x "
                f"| {row['first_window']:.4%} "
                f"| {row['state_ratio']:.2f} | {row['routes']} |",
                flush=True,
            )
    for scenario, values in medians.items():
        print(f"flatness ({scenario}): largest/smallest median = {max(values) / min(values):.2f}")
    print(f"divergences: {diverged}")
    if diverged:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
