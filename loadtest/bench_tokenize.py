"""Per-call session encode cost against the full reference encode, measured in one run.

    python loadtest/bench_tokenize.py [--tokenizer qwen3] [--sizes 100000,1000000,4000000]
                                      [--baseline REV] [--fresh-every 20 --fresh-chars 60000]

For each transcript size a generated agent session (loadtest/agent_sessions/) is fed call by
call to a SessionTokenizer until it reaches the size; then the next ``--calls`` calls are timed
(diff + repair + id array, i.e. ``SessionTokenizer.encode``).  Two scenarios: plain appends, and
Claude Code's per-call billing-line edit near the start of the transcript (plus Qwen's dropped
think blocks).  In both, every ``--fresh-every``-th call of the session appends a fresh stretch
instead: a read of a new ``--fresh-chars``-character file (a large tool output, encoded from
scratch); the p50 / p99 of those calls are printed apart too (``--fresh-every 0``: none).  The
full reference encode of the same transcript is timed in the same run, so the printed ratios
hold on a noisy, shared machine.  Every timed call's ids are checked against
the reference on the last call of each size (and all calls with --verify).

Each timed call is also attributed: its CPU time (all threads), the time its threads waited
for a core (the run queue, ``/proc/self/task/*/schedstat``: on a shared machine this, not the
code, makes most slow calls), the garbage collections inside it and the fresh bytes it encoded;
the three slowest calls of each row are printed so.  ``--baseline REV`` runs the same calls
with the code of an earlier commit too (a temporary git worktree), each side in a worker
process of its own, call by call in alternating order, so both see the same load.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# A worker (--worker) imports the code under test (app) from TOKSPLICE_BENCH_CODE (a checkout),
# and this tree's session generator, so that both sides time the same calls.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("TOKSPLICE_BENCH_CODE", str(ROOT)))

from app.sessions import SessionTokenizer  # noqa: E402
from app.tools import assets  # noqa: E402

sys.path.insert(0, str(ROOT))  # for loadtest alone: the code's own packages come from its tree
from loadtest.agent_sessions import MARKUPS, fresh_call, session_calls  # noqa: E402
from loadtest.processes import checkout  # noqa: E402

sys.path.remove(str(ROOT))

try:
    from app.sessions.tokenizer import store_key
except ImportError:  # a baseline from before one key per session

    def store_key(session: str) -> tuple[str, str]:
        return session.split("/")[0], f"s:{session}"


# The generator's append sizes are heavy-tailed (median ~0.6 x mean); a mean of 2300 chars
# gives the ~1.4K-char median append measured on real agent traffic.
_MEAN_APPEND = 2300
_MEDIAN_APPEND = 1400


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _waited_ms() -> float:
    """Milliseconds this process's threads have spent runnable but not running (Linux)."""
    waited = 0
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            path = f"/proc/self/task/{task}/schedstat"
            with contextlib.suppress(OSError, IndexError, ValueError), open(path) as stat:
                waited += int(stat.read().split()[1])
    return waited / 1e6


class _Collections:
    """Milliseconds spent in garbage collection, and the generations collected, as they go."""

    def __init__(self) -> None:
        self.ms = 0.0
        self.generations: list[int] = []
        self._started = 0.0
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.ms += (time.perf_counter() - self._started) * 1e3
            self.generations.append(info["generation"])

    def take(self) -> tuple[float, list[int]]:
        taken = self.ms, self.generations
        self.ms, self.generations = 0.0, []
        return taken


def timed_calls(
    name: str,
    path: Path,
    size: int,
    calls: int,
    *,
    edits: bool,
    verify: bool,
    fresh_every: int = 0,
    fresh_chars: int = 60_000,
) -> Iterator[dict[str, Any]]:
    """Warms a session up to just below ``size``, then yields one timed call's figures per
    ``next`` (so two workers can alternate), then the row's summary."""
    tok = SessionTokenizer.from_file(path)
    reference = tok.reference.tokenizer
    stream = session_calls(
        size,
        MARKUPS[name],
        target_chars=size * 2 + 10**6,
        append_chars=_MEAN_APPEND,
        billing_line=edits,
        drop_thinking=edits,
        fresh_every=fresh_every,
        fresh_chars=fresh_chars,
    )
    index = -1  # of the call in the session
    # Warm up to just below the size, so that the timed calls straddle it.
    start_at = size - calls * _MEDIAN_APPEND // 2
    text = ""
    for text in stream:
        index += 1
        tok.encode(text, session="bench/s")
        if len(text) >= start_at:
            break
    before = tok.explain()["counters"]
    collections = _Collections()
    timed: list[dict[str, Any]] = []
    routes: dict[str, int] = {}
    for _ in range(calls):
        text = next(stream)
        index += 1
        collections.take()
        waited, cpu = _waited_ms(), time.process_time()
        started = time.perf_counter()
        enc = tok.encode(text, session="bench/s")
        wall = (time.perf_counter() - started) * 1e3
        cpu, waited = (time.process_time() - cpu) * 1e3, _waited_ms() - waited
        gc_ms, generations = collections.take()
        routes[enc.route] = routes.get(enc.route, 0) + 1
        if verify:
            assert list(enc.ids) == reference.encode(text, add_special_tokens=False).ids
        call = {
            "chars": len(text), "ms": wall, "cpu_ms": cpu, "wait_ms": waited, "gc_ms": gc_ms,
            "gc_generations": generations, "fresh_bytes": enc.encoded_bytes,
            "fresh_stretch": fresh_call(index, fresh_every),
        }  # fmt: skip
        timed.append(call)
        yield call
    gc.callbacks.remove(collections._seen)
    full_runs = []
    for _ in range(1 if size >= 2_000_000 else 3):
        started = time.perf_counter()
        full = reference.encode(text, add_special_tokens=False).ids
        full_runs.append((time.perf_counter() - started) * 1e3)
    after = tok.explain()["counters"]
    searches = after.get("searches", 0) - before.get("searches", 0)
    accepted = after.get("first_window", 0) - before.get("first_window", 0)
    state = tok.store.get(store_key("bench/s"))
    assert state is not None
    wall_ms = [call["ms"] for call in timed]
    cpu_ms = [call["cpu_ms"] for call in timed]
    stretch_ms = [call["ms"] for call in timed if call["fresh_stretch"]]
    median = statistics.median(wall_ms)
    full_ms = statistics.median(full_runs)
    yield {
        "chars": statistics.median(call["chars"] for call in timed),
        "median_ms": median,
        "p99_ms": _percentile(wall_ms, 0.99),
        "stretch_calls": len(stretch_ms),
        "stretch_p50_ms": statistics.median(stretch_ms) if stretch_ms else float("nan"),
        "stretch_p99_ms": _percentile(stretch_ms, 0.99) if stretch_ms else float("nan"),
        "cpu_p50_ms": statistics.median(cpu_ms),
        "cpu_p99_ms": _percentile(cpu_ms, 0.99),
        "full_ms": full_ms,
        "speedup": full_ms / median,
        "first_window": accepted / searches if searches else float("nan"),
        "state_ratio": state.nbytes / (len(state.text) + 4 * len(state.ids)),
        "divergent": list(enc.ids) != full,
        "routes": routes,
        "slowest": sorted(timed, key=lambda call: -call["ms"])[:3],
        "calls": timed,
    }


def _worker(args: argparse.Namespace, path: Path) -> None:
    """--worker: one row's calls, one per line read from stdin, each answered on stdout."""
    calls = timed_calls(
        args.tokenizer,
        path,
        args.sizes_list[0],
        args.calls,
        edits=args.edits,
        verify=args.verify,
        fresh_every=args.fresh_every,
        fresh_chars=args.fresh_chars,
    )
    for _ in range(args.calls):
        sys.stdin.readline()
        print(json.dumps(next(calls)), flush=True)
    print(json.dumps(next(calls)), flush=True)


def _paired_row(
    args: argparse.Namespace, trees: list[Path], size: int, edits: bool
) -> list[dict[str, Any]]:
    """Each tree's row, its calls made by worker processes in alternating order."""
    command = [
        sys.executable, __file__, "--worker", "--tokenizer", args.tokenizer,
        "--sizes", str(size), "--calls", str(args.calls), "--tokenizer-file", str(args.path),
        "--fresh-every", str(args.fresh_every), "--fresh-chars", str(args.fresh_chars),
        *(["--edits"] if edits else []), *(["--verify"] if args.verify else []),
    ]  # fmt: skip
    workers = [
        subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "TOKSPLICE_BENCH_CODE": str(tree)},
            cwd=tree,
        )
        for tree in trees
    ]
    try:
        for k in range(args.calls):
            for worker in workers[:: -1 if k % 2 else 1]:
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write("\n")
                worker.stdin.flush()
                worker.stdout.readline()
        rows = []
        for worker in workers:
            assert worker.stdout is not None
            rows.append(json.loads(worker.stdout.readline()))
        return rows
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()


def _format(scenario: str, row: dict[str, Any]) -> str:
    return (
        f"| {scenario} | {row['chars']:,.0f} | {row['median_ms']:.2f} | {row['p99_ms']:.2f} "
        f"| {row['cpu_p50_ms']:.2f} / {row['cpu_p99_ms']:.2f} | {row['full_ms']:.0f} "
        f"| {row['speedup']:.0f}x | {row['first_window']:.4%} | {row['state_ratio']:.2f} "
        f"| {row['stretch_calls']}: {row['stretch_p50_ms']:.2f} / {row['stretch_p99_ms']:.2f} "
        f"| {row['routes']} |"
    )


def _slowest(row: dict[str, Any]) -> str:
    return "; ".join(
        f"{c['ms']:.1f} ms = cpu {c['cpu_ms']:.1f} + waiting for a core {c['wait_ms']:.1f}"
        f" (gc {c['gc_ms']:.1f} ms {c['gc_generations']}, {c['fresh_bytes']:,} fresh bytes)"
        for c in row["slowest"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokenizer", default="qwen3", choices=sorted(MARKUPS))
    parser.add_argument("--sizes", default="100000,1000000,4000000")
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--verify", action="store_true", help="check every timed call's ids")
    parser.add_argument(
        "--baseline", metavar="REV", help="also time the code of git revision REV, call by call"
    )
    parser.add_argument(
        "--fresh-every",
        type=int,
        default=20,
        help="every so many calls of the session append a fresh stretch (0: none)",
    )
    parser.add_argument(
        "--fresh-chars", type=int, default=60_000, help="the fresh stretch's characters"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--edits", action="store_true", help=argparse.SUPPRESS)
    # a worker of an older tree may lack the assets' model list: it is given the file
    parser.add_argument("--tokenizer-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.sizes_list = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        _worker(args, args.tokenizer_file)
        return
    path = args.path = (assets.fetch() | assets.models())[args.tokenizer]
    print(f"tokenizer: {args.tokenizer} ({path}); load average {os.getloadavg()}")
    print(
        "| scenario | transcript chars (median) | median ms/call | p99 ms | CPU p50 / p99 ms "
        "| full encode ms | speedup | first-window acceptance | state / (text+4B/token) "
        f"| fresh {args.fresh_chars:,}-char stretches: calls, p50 / p99 ms | routes |"
    )
    print("|" + "---|" * 11)
    medians: dict[str, list[float]] = {}
    diverged = 0
    with contextlib.ExitStack() as stack:
        trees = [ROOT] + ([stack.enter_context(checkout(args.baseline))] if args.baseline else [])
        for edits in (False, True):
            scenario = "billing-line edit + appends" if edits else "appends"
            for size in args.sizes_list:
                if args.baseline:
                    rows = _paired_row(args, trees, size, edits)
                else:
                    *_, last = timed_calls(
                        args.tokenizer,
                        path,
                        size,
                        args.calls,
                        edits=edits,
                        verify=args.verify,
                        fresh_every=args.fresh_every,
                        fresh_chars=args.fresh_chars,
                    )
                    rows = [last]
                diverged += sum(int(row["divergent"]) for row in rows)
                medians.setdefault(scenario, []).append(rows[0]["median_ms"])
                print(_format(scenario, rows[0]), flush=True)
                print(f"    slowest: {_slowest(rows[0])}")
                if args.baseline:
                    print(f"    {args.baseline}: {_format(scenario, rows[1])}")
                    print(f"    {args.baseline} slowest: {_slowest(rows[1])}")
                    pairs = zip(rows[0]["calls"], rows[1]["calls"], strict=True)
                    ratios = [a["ms"] / b["ms"] for a, b in pairs]
                    print(
                        f"    per-call ratio (this / {args.baseline}) median "
                        f"{statistics.median(ratios):.2f}; load average {os.getloadavg()}"
                    )
    for scenario, values in medians.items():
        print(f"flatness ({scenario}): largest/smallest median = {max(values) / min(values):.2f}")
    print(f"divergences: {diverged}")
    if diverged:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
