"""Lock contention on the one session registry (``app.sessions.registry``).

    .venv/bin/python loadtest/registry_contention.py [--threads 1,2,4,8] [--seconds 1.5]
        [--work-us 0,200] [--sessions 2000] [--proxy-calls 6]

K threads each replay a proxy call's registry traffic, call after call, on sessions drawn
from ``--sessions`` (a few hot ones most of the time): the body memo (get, put), the token
state (``MemoryStore.get``, then ``put``, with its content index), the last text (get, put),
the render memo (get, put) and the id JSON (put), against one registry whose budget holds
about half the sessions (so stores also evict).  ``--work-us`` is the time a call spends
outside the registry between its two halves (render and tokenize), slept so that it
releases the GIL as the native encoders do; 0 is the worst case, registry work only.

Printed per thread count: calls/s, its ratio to 1 thread in the same run, the share of
lock acquisitions that had to wait, the wait's p50 / p99 over all acquisitions and over
those that waited, and its max (µs).  Then the registry lock acquisitions of real chat
calls through the proxy, in process (``create_app``; the upstream is a canned completion,
nothing leaves the process), first call and continuations of one session.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.sessions.memory import MemoryStore
from app.sessions.registry import SessionRegistry
from app.tokenization.state import SessionState


class TimedLock:
    """A ``threading.Lock`` that counts its acquisitions and how long each one waited."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waits: list[int] = []
        """ns per acquisition (0: it was free), appended while held."""

    def __enter__(self) -> TimedLock:
        if self._lock.acquire(blocking=False):
            waited = 0
        else:
            started = time.perf_counter_ns()
            self._lock.acquire()
            waited = time.perf_counter_ns() - started
        self.waits.append(waited)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._lock.release()


def _states(n: int) -> list[SessionState]:
    """Token states of a few KB (the store indexes their texts, as for real ones)."""
    rng = np.random.default_rng(0)
    return [
        SessionState(
            rng.integers(32, 127, 4096 + 64 * k, np.uint8).tobytes(),
            np.zeros(1024, np.int32),
            np.zeros(1024, np.int32),
        )
        for k in range(n)
    ]


def _run(threads: int, seconds: float, work_s: float, sessions: int) -> tuple[int, list[int]]:
    """Calls done by ``threads`` threads in ``seconds``, and the lock's waits."""
    states = _states(64)
    per_session = states[0].nbytes + 3 * 8192
    registry = SessionRegistry(per_session * sessions // 2)
    lock = TimedLock()
    registry.lock = lock  # type: ignore[assignment]
    store = MemoryStore(registry=registry)
    body, recent, render, ids = (registry.slot(n) for n in ("body", "recent", "render", "ids"))
    stop = threading.Event()
    done = [0] * threads

    def worker(n: int) -> None:
        rng = random.Random(n)
        while not stop.is_set():
            hot = rng.random() < 0.8
            session = rng.randrange(16 if hot else sessions)
            key = f"t/s:{session}"
            body.get(key)
            body.put(key, n, 8192)
            store.get(("t", f"s:{session}"))
            recent.get(key)
            render.get(key)
            if work_s:
                time.sleep(work_s)
            state = states[rng.randrange(len(states))]
            store.put(("t", f"s:{session}"), state)
            recent.put(key, n, 4096)
            render.put(key, n, 8192)
            ids.put(key, n, 4096)
            done[n] += 1

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    return sum(done), lock.waits


def _proxy_acquisitions(calls: int) -> list[int]:
    """Registry lock acquisitions of each of ``calls`` growing chat calls of one session."""
    from fastapi.testclient import TestClient

    from app.config import Settings
    from app.main import create_app
    from app.tools import assets

    def upstream(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v1/completions":
            return httpx.Response(404, json={"detail": "Not Found"})
        answer = {"choices": [{"text": "fine", "index": 0, "finish_reason": "stop"}]}
        return httpx.Response(200, json=answer)

    folder = assets.fetch()["smollm2"].parent
    settings = Settings(
        upstream="http://upstream.test", tokenizer=folder, model="m", alignment_check=False
    )
    app = create_app(settings, transport=httpx.MockTransport(upstream))
    counts = []
    with TestClient(app) as client:
        lock = TimedLock()
        app.state.sessions.lock = lock
        messages: list[dict[str, Any]] = [{"role": "system", "content": "Answer briefly."}]
        for k in range(calls):
            messages += [{"role": "user", "content": f"question {k}: and then?"}]
            before = len(lock.waits)
            reply = client.post(
                "/v1/chat/completions",
                content=orjson.dumps({"model": "m", "messages": messages}),
                headers={"authorization": "Bearer k", "x-session-id": "one"},
            )
            assert reply.status_code == 200, reply.text
            counts.append(len(lock.waits) - before)
            messages += [{"role": "assistant", "content": "fine"}]
    return counts


def _us(ns: float) -> str:
    return f"{ns / 1000:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2,4,8")
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--work-us", default="0,200")
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--proxy-calls", type=int, default=6, help="0: skip the proxy calls")
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"cores: {len(os.sched_getaffinity(0))}")  # fmt: skip
    print("| work µs | threads | calls/s | vs 1 thread | waited | p50 / p99 µs "
          "| waited: p50 / p99 µs | max µs |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for work_us in (int(w) for w in args.work_us.split(",")):
        single = 0.0
        for threads in (int(t) for t in args.threads.split(",")):
            calls, waits = _run(threads, args.seconds, work_us / 1e6, args.sessions)
            rate = calls / args.seconds
            single = single or rate
            ordered = np.sort(np.asarray(waits, np.int64))
            contended = ordered[ordered > 0]
            every = "{} / {}".format(*map(_us, np.percentile(ordered, [50, 99])))
            some = (
                "{} / {}".format(*map(_us, np.percentile(contended, [50, 99])))
                if len(contended)
                else "-"
            )
            print(f"| {work_us} | {threads} | {rate:,.0f} | {rate / single:.2f} | "
                  f"{len(contended) / len(ordered):.2%} | {every} | {some} "
                  f"| {_us(ordered[-1])} |")  # fmt: skip
    if args.proxy_calls:
        counts = _proxy_acquisitions(args.proxy_calls)
        print(f"registry lock acquisitions per chat call (first, then continuations): {counts}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
