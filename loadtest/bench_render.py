"""Per-call chat-template render time on a growing ~1M-character agent session (Qwen3).

    .venv/bin/python loadtest/bench_render.py [--chars 1000000] [--calls 40]

A generated agent session (loadtest/agent_sessions, OpenAI chat bodies) is replayed up to
``--chars``; each of the last ``--calls`` bodies is decoded afresh from JSON (as a server
receives it) and rendered three ways, all timed in the same run:

* ``jinja sandbox``: a plain ``ImmutableSandboxedEnvironment`` render of the template (what
  transformers does), on messages already prepared by ``prepare_messages`` (not timed);
* ``ChatTemplate``: ``render`` without a cache (message preparation + cached-safety sandbox);
* ``ChatTemplate + RenderCache``: ``render`` with the session's loop memo, warmed by the
  earlier calls of the session (the first measured call is the cold one, reported apart).

Every memoized result is checked against the uncached one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.rendering import ChatTemplate, RenderCache, prepare_messages
from loadtest.agent_sessions import chat_requests

CONFIG = Path(__file__).resolve().parents[1] / ".assets" / "qwen3" / "tokenizer_config.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    template = ChatTemplate.from_tokenizer_config(CONFIG)
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(
        template.source())
    bodies = [json.dumps(b) for b in chat_requests(args.seed, target_chars=args.chars)]
    cache = RenderCache()
    warm = bodies[: -args.calls]
    # warm the session memo on a sample of the earlier calls (every call in a real session)
    for text in warm[-3:]:
        body = json.loads(text)
        template.render(body["messages"], tools=body["tools"], cache=cache, session="bench")
    times: dict[str, list[float]] = {"jinja sandbox": [], "ChatTemplate": [],
                                     "ChatTemplate + RenderCache": []}
    size = 0
    for text in bodies[-args.calls:]:
        body = json.loads(text)
        prepared = prepare_messages(body["messages"], "string")
        t0 = time.perf_counter()
        plain.render(messages=prepared, tools=body["tools"], add_generation_prompt=True)
        t1 = time.perf_counter()
        expected = template.render(body["messages"], tools=body["tools"])
        t2 = time.perf_counter()
        body = json.loads(text)
        t3 = time.perf_counter()
        got = template.render(body["messages"], tools=body["tools"], cache=cache,
                              session="bench")
        t4 = time.perf_counter()
        if got != expected:
            raise SystemExit("memoized render differs from the fresh render")
        times["jinja sandbox"].append(t1 - t0)
        times["ChatTemplate"].append(t2 - t1)
        times["ChatTemplate + RenderCache"].append(t4 - t3)
        size = len(expected)
    last = json.loads(bodies[-1])
    print(f"session: {len(bodies)} calls; last call {len(last['messages'])} messages, "
          f"rendered prompt {size:,} chars; timing the last {args.calls} calls")
    for name, values in times.items():
        ordered = sorted(values)
        print(f"  {name:28s} median {statistics.median(values) * 1e3:7.2f} ms   "
              f"p90 {ordered[int(0.9 * (len(ordered) - 1))] * 1e3:7.2f} ms   "
              f"max {ordered[-1] * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
