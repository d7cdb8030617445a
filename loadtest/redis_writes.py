"""The Redis store's write-behind thread alone: CPU and bytes per write, RSS over time.

    redis-server --port 6399 --save '' --appendonly no &
    python loadtest/redis_writes.py --store redis://127.0.0.1:6399/0 [--chars 100000]

Agent sessions (Qwen3 markup) are encoded once by a ``SessionTokenizer`` to get their stored
states, in the soak's shape: each session is brought to ``--chars``, then cycles through its
next ``--span`` calls and rewinds.  The timed loop then ``put``s those states into a
``RedisStore`` one at a time, waiting for each write (no coalescing), for ``--rounds`` cycles.
Printed: the writer thread's CPU per write (from ``/proc``, so only that thread), bytes Redis
received per write (``INFO stats``), the read-back time of one session, and the process's RSS
with ``tracemalloc``'s traced size at a few points (``--tracemalloc``; it slows writes down):
RSS that grows while traced memory stays flat is the allocator's, not a leak.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterable
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.sessions import SessionTokenizer  # noqa: E402
from app.sessions.memory import MemoryStore  # noqa: E402
from app.sessions.redis_store import RedisStore  # noqa: E402
from app.sessions.store_entry import fingerprint  # noqa: E402
from app.sessions.tokenizer import store_key  # noqa: E402
from app.tokenization.state import SessionState  # noqa: E402
from app.tools import assets  # noqa: E402
from loadtest.agent_sessions import MARKUPS, session_calls  # noqa: E402


def stored_states(tokenizer: Path, texts: Iterable[str]) -> list[SessionState]:
    """The states a session tokenizer stores for successive calls of one session."""
    store = MemoryStore(1 << 30)
    tok = SessionTokenizer.from_file(tokenizer, store=store)
    states = []
    for text in texts:
        tok.encode(text, session="t/s")
        state = store.get(store_key("t/s"))
        assert state is not None
        states.append(state)
    return states


def session_states(seed: int, chars: int, span: int, billing: bool) -> list[SessionState]:
    """The stored states of one session's ``span + 1`` calls from ``chars`` characters on."""
    target = chars + span * 5000
    calls = list(session_calls(seed, MARKUPS["qwen3"], target_chars=target, billing_line=billing))
    start = next(k for k, text in enumerate(calls) if len(text) >= chars)
    assert len(calls) > start + span, "the session ended early: a smaller --span"
    return stored_states(assets.fetch()["qwen3"], calls[start : start + span + 1])


def thread_cpu_s(native_id: int) -> float:
    fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True, help="a Redis URL (its db is flushed)")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--chars", type=int, default=100_000)
    parser.add_argument("--span", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--billing", action="store_true", help="Claude Code's billing line")
    parser.add_argument("--tracemalloc", action="store_true")
    args = parser.parse_args()

    sessions = [
        (("bench", f"s:{s}"), session_states(s, args.chars, args.span, args.billing))
        for s in range(args.sessions)
    ]
    client = redis.Redis.from_url(args.store)
    client.flushdb()
    tokenizer = fingerprint(assets.fetch()["qwen3"].read_bytes())
    store = RedisStore(args.store, tokenizer=tokenizer, local=MemoryStore(1 << 30), timeout_s=2)
    writer = next(t for t in threading.enumerate() if t.name == "redis-store")
    assert writer.native_id is not None
    if args.tracemalloc:
        tracemalloc.start()
    received = int(client.info("stats")["total_net_input_bytes"])
    cpu = thread_cpu_s(writer.native_id)
    started = time.perf_counter()
    writes = 0
    for r in range(args.rounds):
        for k in range(args.span + 1):
            for key, states in sessions:
                store.put(key, states[k])
                assert store.flush()
                writes += 1
        if r % max(1, args.rounds // 5) == 0 or r == args.rounds - 1:
            traced = tracemalloc.get_traced_memory()[0] / 2**20 if args.tracemalloc else 0.0
            print(f"round {r:4d}: RSS {rss_mb():7.1f} MB, traced {traced:6.1f} MB")
    elapsed = time.perf_counter() - started
    cpu = thread_cpu_s(writer.native_id) - cpu
    received = int(client.info("stats")["total_net_input_bytes"]) - received
    counts = store.stats()
    store.close()

    reader = RedisStore(args.store, tokenizer=tokenizer, local=MemoryStore(1 << 30))
    read_started = time.perf_counter()
    assert reader.get(sessions[0][0]) is not None
    read_ms = (time.perf_counter() - read_started) * 1000
    reader.close()
    size = sum(len(s[1][-1].text) for s in sessions) // len(sessions)
    print(
        f"{writes} writes of ~{size:,}-byte transcripts in {elapsed:.1f} s: "
        f"writer CPU {cpu / writes * 1e6:.0f} us/write, "
        f"{received / writes / 1024:.1f} KiB sent/write, one read {read_ms:.2f} ms; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print({k: v for k, v in counts.items() if k.startswith("redis_")})


if __name__ == "__main__":
    main()
