"""Per-call chat-template render time on growing agent sessions (Qwen3's real template).

    .venv/bin/python loadtest/bench_render.py [--chars 100000 1000000] [--calls 40] [--baseline]

For each size, a generated agent session (loadtest/agent_sessions, OpenAI chat bodies with
tools, tool calls and reasoning) is replayed up to that many characters; each of the last
``--calls`` bodies is decoded afresh from JSON (as a server receives it) and rendered:

* ``fresh``: ``ChatTemplate.render`` without a cache (message preparation + template);
* ``memo``: ``render`` with a ``RenderCache``, as the session's next call (the call before
  the window warms it), so new user turns (Qwen3 then drops old reasoning) are included;
* ``frozen``: the proxy's pattern: the bodies' own message objects (each call's are the
  previous call's plus new ones, as ``chat_requests`` shares them) with ``frozen=True``,
  in a cache of its own, the previous result still held (as the proxy's tokenizer does);
* ``json.loads``: decoding the body, as a yardstick for this (shared, noisy) machine.

``--baseline`` first runs the same in a child process with ``RenderCache.make_room``
disabled (the allocator tuning is process-wide and one-way, so it needs its own process).

Every memoized result is checked against the fresh one. Also printed: how many of the
window's calls took the fast path (prepared only the new messages and rendered only the
main loop's iterations for them plus two: the first, which may read ``messages[-1]``, and
the former last, which read ``loop.last``); a new user turn also re-renders the turns whose
reasoning it drops.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.memos import Memos
from app.rendering import ChatTemplate, RenderCache
from app.rendering.memo import RenderMemos
from app.sessions.registry import SessionRegistry
from loadtest.agent_sessions import chat_requests

CONFIG = Path(__file__).resolve().parents[1] / ".assets" / "qwen3" / "tokenizer_config.json"


def bench(template: ChatTemplate, chars: int, calls: int, seed: int) -> None:
    objects = list(chat_requests(seed, target_chars=chars, reasoning=True))
    bodies = [json.dumps(b) for b in objects]
    # The proxy's pattern, timed first and on its own (other renders churn the allocator):
    # consecutive calls in a fresh cache, each holding the previous result.
    times: dict[str, list[float]] = {"fresh": [], "memo": [], "frozen": [], "json.loads": []}
    paged: list[int] = []  # page faults of each frozen call
    frozen_cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    for shared in objects[-calls - 1 :]:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        held = template.render(
            shared["messages"], tools=shared["tools"], cache=frozen_cache, session="s", frozen=True
        )
        t1 = time.perf_counter()
        if shared is not objects[-calls - 1]:
            times["frozen"].append(t1 - t0)
            paged.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults)
    sessions = SessionRegistry(1 << 30)
    memos: Memos[RenderMemos] = sessions.slot("render")
    cache = RenderCache(memos)
    frozen_cache = RenderCache(sessions.slot("frozen_render"))  # checks the frozen mode afresh
    fast = turns = before = 0
    for text, shared in zip(bodies[-calls - 1 :], objects[-calls - 1 :], strict=True):
        t0 = time.perf_counter()
        body = json.loads(text)
        t1 = time.perf_counter()
        expected = template.render(body["messages"], tools=body["tools"])
        t2 = time.perf_counter()
        body = json.loads(text)
        t3 = time.perf_counter()
        got = template.render(body["messages"], tools=body["tools"], cache=cache, session="bench")
        t4 = time.perf_counter()
        held = template.render(
            shared["messages"], tools=shared["tools"], cache=frozen_cache, session="s", frozen=True
        )
        if got != expected or held != expected:
            raise SystemExit("memoized render differs from the fresh render")
        new, before = len(body["messages"]) - before, len(body["messages"])
        if text is bodies[-calls - 1]:
            continue  # the warm-up call
        times["json.loads"].append(t1 - t0)
        times["fresh"].append(t2 - t1)
        times["memo"].append(t4 - t3)
        memo = next(iter((memos.get("bench") or {}).values()))
        rendered = [before - run.replayed for run in memo.runs.values()]
        fast += memo.reused == before - new and rendered == [new + 2]
        turns += body["messages"][-1]["role"] == "user"
    last = json.loads(bodies[-1])
    print(
        f"{chars:,} chars: {len(bodies)} calls; last call {len(last['messages'])} messages, "
        f"prompt {len(expected):,} chars; last {calls} calls ({turns} new user turns), "
        f"{fast} on the fast path; frozen calls' page faults: median "
        f"{statistics.median(paged):.0f}"
    )
    for name, values in times.items():
        ordered = sorted(values)
        print(
            f"  {name:11s} median {statistics.median(values) * 1e3:7.2f} ms   "
            f"p90 {ordered[int(0.9 * (len(ordered) - 1))] * 1e3:7.2f} ms   "
            f"max {ordered[-1] * 1e3:7.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--baseline", action="store_true", help="also run without make_room")
    parser.add_argument("--no-make-room", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        print("baseline (RenderCache.make_room disabled, own process):", flush=True)
        command = [sys.executable, __file__, "--no-make-room", "--calls", str(args.calls)]
        command += ["--seed", str(args.seed), "--chars", *map(str, args.chars)]
        subprocess.run(command, check=True)
        print("current:", flush=True)
    if args.no_make_room:
        RenderCache.make_room = lambda self, text: None  # type: ignore[method-assign]
    template = ChatTemplate.from_tokenizer_config(CONFIG)
    for chars in args.chars:
        bench(template, chars, args.calls, args.seed)


if __name__ == "__main__":
    main()
