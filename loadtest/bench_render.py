"""Per-call chat-template render time on growing agent sessions (Qwen3's real template).

    .venv/bin/python loadtest/bench_render.py [--chars 100000 1000000] [--calls 40]

For each size, a generated agent session (loadtest/agent_sessions, OpenAI chat bodies with
tools, tool calls and reasoning) is replayed up to that many characters; each of the last
``--calls`` bodies is decoded afresh from JSON (as a server receives it) and rendered:

* ``fresh``: ``ChatTemplate.render`` without a cache (message preparation + template);
* ``memo``: ``render`` with a ``RenderCache``, as the session's next call (the call before
  the window warms it), so new user turns (Qwen3 then drops old reasoning) are included;
* ``json.loads``: decoding the body, as a yardstick for this (shared, noisy) machine.

Every memoized result is checked against the fresh one. Also printed: how many of the
window's calls took the fast path (prepared only the new messages and rendered only the
main loop's iterations for them plus two: the first, which may read ``messages[-1]``, and
the former last, which read ``loop.last``); a new user turn also re-renders the turns whose
reasoning it drops.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.rendering import ChatTemplate, RenderCache
from loadtest.agent_sessions import chat_requests

CONFIG = Path(__file__).resolve().parents[1] / ".assets" / "qwen3" / "tokenizer_config.json"


def bench(template: ChatTemplate, chars: int, calls: int, seed: int) -> None:
    bodies = [json.dumps(b) for b in chat_requests(seed, target_chars=chars, reasoning=True)]
    cache = RenderCache()
    times: dict[str, list[float]] = {"fresh": [], "memo": [], "json.loads": []}
    fast = turns = before = 0
    for text in bodies[-calls - 1 :]:
        t0 = time.perf_counter()
        body = json.loads(text)
        t1 = time.perf_counter()
        expected = template.render(body["messages"], tools=body["tools"])
        t2 = time.perf_counter()
        body = json.loads(text)
        t3 = time.perf_counter()
        got = template.render(body["messages"], tools=body["tools"], cache=cache, session="bench")
        t4 = time.perf_counter()
        if got != expected:
            raise SystemExit("memoized render differs from the fresh render")
        new, before = len(body["messages"]) - before, len(body["messages"])
        if text is bodies[-calls - 1]:
            continue  # the warm-up call
        times["json.loads"].append(t1 - t0)
        times["fresh"].append(t2 - t1)
        times["memo"].append(t4 - t3)
        memo = next(iter(cache._sessions.values()))
        rendered = [before - run.replayed for run in memo.runs.values()]
        fast += memo.reused == before - new and rendered == [new + 2]
        turns += body["messages"][-1]["role"] == "user"
    last = json.loads(bodies[-1])
    print(
        f"{chars:,} chars: {len(bodies)} calls; last call {len(last['messages'])} messages, "
        f"prompt {len(expected):,} chars; last {calls} calls ({turns} new user turns), "
        f"{fast} on the fast path"
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
    args = parser.parse_args()
    template = ChatTemplate.from_tokenizer_config(CONFIG)
    for chars in args.chars:
        bench(template, chars, args.calls, args.seed)


if __name__ == "__main__":
    main()
