"""Replay agent sessions through the proxy and straight to the upstream; TTFT and proxy cost.

    python loadtest/replay.py [--sizes 100000,1000000] [--concurrency 1,4] [--calls 30]
                              [--fresh-every 20 --fresh-chars 60000]

Starts the stand-in upstream (``standin_upstream.py``: answers at once, and for the direct path
renders and tokenizes the whole chat request as a server does) and ``toksplice serve`` in front
of it, each in its own process, with the Qwen3 tokenizer and chat template.  For every size,
``N`` agent sessions (``loadtest/agent_sessions.chat_requests``, streamed, with tools, tool
calls and reasoning) run side by side: each is brought to the size with one cold call through
the proxy, then ``--calls`` continuation calls are timed through the proxy, and
``--direct-calls`` of the same requests straight to the upstream.  Every ``--fresh-every``-th
call of a session brings a fresh stretch instead of the usual small append: a read of a new
``--fresh-chars``-character file (a large tool output; ``--fresh-every 0``: none).  Printed
per size and concurrency, all from one run:

* TTFT (client send -> first content chunk) direct and through the proxy, p50 / p99;
* proxy-added latency: request in -> upstream request out, as the proxy measures it
  (``Server-Timing: proxy``: body read, JSON parse, render, tokenize, id JSON, request build),
  p50 / p99 over all calls and over the fresh-stretch calls alone;
* render and tokenize medians, and the tokenization routes taken;
* the three slowest calls through the proxy, each split into its Server-Timing parts.

``--baseline REV`` also starts the proxy of an earlier commit (a temporary git worktree) on
the same upstream and sends every call to both, in alternating order, so that the two are
measured under the same load (the two proxies share one core, the rest run on the others):
printed per row, both proxy-added p50s, their ratio, and the median of the per-call ratios;
the same two ratios for every Server-Timing part (``rest``: the proxy-added time outside
read, parse, render and tokenize), to tell which stage moved.
Run it once with ``--baseline HEAD`` (the same code on both sides) to see the noise floor of
the machine at its present load before reading a ratio as a regression.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.tools import assets  # noqa: E402
from loadtest.agent_sessions import (  # noqa: E402
    Shape,
    anthropic_body,
    chat_requests,
    content_chars,
    fresh_call,
    session_id,
)
from loadtest.processes import (  # noqa: E402
    checkout,
    free_port,
    process,
    serve_args,
    server_timing,
    standin_args,
)

MODEL = "qwen3"
_FIRST_TEXT = re.compile(r'"content":"[^"]|"text_delta"')
_STAGES = ("read", "parse", "render", "tokenize")
_PATHS = {"chat": "/v1/chat/completions", "anthropic": "/v1/messages"}


@dataclass
class Samples:
    ttft: list[float] = field(default_factory=list)
    parts: dict[str, list[float]] = field(default_factory=dict)
    """Server-Timing parts: read, parse, render, tokenize, proxy (ms); ``rest`` is the
    proxy-added time outside the four stages."""
    routes: Counter[str] = field(default_factory=Counter)
    stretch: list[bool] = field(default_factory=list)
    """Per call with parts: whether it brought a fresh stretch."""


def _timed_bodies(
    seed: int,
    size: int,
    calls: int,
    typed_specials: bool,
    api: str,
    shape: Shape | None = None,
    fresh: tuple[int, int] = (0, 0),
) -> tuple[list[bytes], list[bytes], list[bool]]:
    """The session's call just before it reaches ``size`` (the cold warm-up), then ``calls``
    continuation calls, serialised ahead of time.  Without ``typed_specials`` the special-token
    lookalikes the generator puts in tool outputs (``<|im_end|>`` in a source file) are
    defused, so the sessions take the plain repair path.  ``shape``: what the model's template
    accepts of tool-call turns (``chat_requests``).  ``fresh``: (every, chars) of the fresh
    stretches.  Returns (bodies for the proxy in ``api``'s shape, the same requests as chat
    bodies for the direct path, whether each timed call brings a fresh stretch)."""
    bodies = []
    stretch = []
    anthropic = api == "anthropic"
    for index, body in enumerate(
        chat_requests(
            seed,
            target_chars=size * 2,
            model=MODEL,
            stream=True,
            billing_line=anthropic,
            shape=shape or Shape(),
            fresh_every=fresh[0],
            fresh_chars=fresh[1],
        )
    ):
        if bodies or content_chars(body["messages"]) >= size:
            bodies.append(body)
            stretch.append(fresh_call(index, fresh[0]))
            if len(bodies) == calls + 1:
                break
        else:
            warm = body
    out = [warm, *bodies[:calls]]
    direct = [orjson.dumps(b | {"stream_options": {"include_usage": True}}) for b in out]
    proxied = [orjson.dumps(anthropic_body(b)) for b in out] if anthropic else direct
    stretch = stretch[:calls]
    if typed_specials:
        return proxied, direct, stretch
    defused = [r.replace(b"<|", b"< |") for r in proxied]
    return defused, [r.replace(b"<|", b"< |") for r in direct], stretch


async def _call(
    client: httpx.AsyncClient,
    url: str,
    body: bytes,
    headers: dict[str, str],
    samples: Samples | None,
    stretch: bool = False,
) -> None:
    started = time.perf_counter()
    async with client.stream("POST", url, content=body, headers=headers) as reply:
        if reply.status_code != 200:
            raise RuntimeError(f"{url}: {reply.status_code} {(await reply.aread())[:300]!r}")
        first = None
        async for line in reply.aiter_lines():
            if first is None and line.startswith("data: {") and _FIRST_TEXT.search(line):
                first = time.perf_counter()
    if samples is None:
        return
    samples.ttft.append(((first or time.perf_counter()) - started) * 1e3)
    timing = server_timing(reply.headers)
    if "proxy" in timing:  # what no named part covers: the request build, the hops between
        timing["rest"] = timing["proxy"] - sum(timing.get(k, 0.0) for k in _STAGES)
    for name, value in timing.items():
        samples.parts.setdefault(name, []).append(value)
    if timing:
        samples.routes[reply.headers.get("x-toksplice-route", "?")] += 1
        samples.stretch.append(stretch)


async def _session(
    proxies: list[str],
    upstream: str,
    seed: int,
    bodies: tuple[list[bytes], list[bytes], list[bool]],
    direct: int,
    through: list[Samples],
    straight: Samples,
    api: str,
) -> None:
    """One session: the warm-up call, the timed calls through each proxy (in turn, the first
    one first every other call), then some of the same requests straight to the upstream
    (as chat bodies: the upstream renders them)."""
    proxied, chat, stretch = bodies
    headers = {
        "content-type": "application/json",
        "x-session-id": session_id(seed),
        "x-claude-code-session-id": session_id(seed),
    }
    urls = [proxy + _PATHS[api] for proxy in proxies]
    async with httpx.AsyncClient(timeout=600) as client:
        for url in urls:
            await _call(client, url, proxied[0], headers, None)
        for k, body in enumerate(proxied[1:]):
            for j in range(len(urls))[:: -1 if k % 2 else 1]:
                await _call(client, urls[j], body, headers, through[j], stretch[k])
        for body in chat[1 : 1 + direct]:
            await _call(client, upstream + _PATHS["chat"], body, headers, straight)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run(
    sizes: list[int],
    concurrency: list[int],
    calls: int,
    direct: int,
    api: str,
    baseline: str | None = None,
    fresh: tuple[int, int] = (0, 0),
) -> list[dict[str, Any]]:
    folder = assets.fetch()["qwen3"].parent
    up_port, proxy_port, base_port = free_port(), free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    proxies = [f"http://127.0.0.1:{proxy_port}"]
    rows = []
    mine, others = _cores(baseline is not None)
    if others is not None:
        os.sched_setaffinity(0, others)
    with contextlib.ExitStack() as stack:
        standin = process(standin_args(folder, up_port), upstream + "/health", cores=others)
        stack.enter_context(standin)
        args = serve_args(upstream, folder, MODEL, proxy_port)
        stack.enter_context(process(args, proxies[0] + "/health", cores=mine))
        if baseline is not None:
            tree = stack.enter_context(checkout(baseline))
            proxies.append(f"http://127.0.0.1:{base_port}")
            args = serve_args(upstream, folder, MODEL, base_port)
            stack.enter_context(process(args, proxies[1] + "/health", root=tree, cores=mine))
        for typed, size, n in itertools.product((False, True), sizes, concurrency):
            seeds = [size // 1000 + 7919 * n + 104729 * typed + k for k in range(n)]
            sessions = [_timed_bodies(seed, size, calls, typed, api, fresh=fresh) for seed in seeds]
            through, straight = [Samples() for _ in proxies], Samples()

            async def main(
                seeds: list[int] = seeds,
                sessions: list[tuple[list[bytes], list[bytes], list[bool]]] = sessions,
                through: list[Samples] = through,
                straight: Samples = straight,
            ) -> None:
                await asyncio.gather(
                    *(
                        _session(proxies, upstream, seed, bodies, direct, through, straight, api)
                        for seed, bodies in zip(seeds, sessions, strict=True)
                    )
                )

            asyncio.run(main())
            row = _row(size, n, typed, through[0], straight) | {"api": api}
            if baseline is not None:
                row |= _paired(baseline, through[0], through[1])
            rows.append(row)
            print(_format(rows[-1]), flush=True)
    return rows


def _cores(paired: bool) -> tuple[set[int] | None, set[int] | None]:
    """(the proxies' cores, everyone else's): with a baseline on a machine of two cores or
    more, both proxies share the last core and this client and the upstream run on the rest,
    so that neither proxy meets the others' work on its core more often than the other does
    (unpinned, the same code read ~5% slower on one side than on the other here); else
    (None, None)."""
    cores = sorted(os.sched_getaffinity(0))
    if not paired or len(cores) < 2:
        return None, None
    return {cores[-1]}, set(cores[:-1])


def _paired(baseline: str, ours: Samples, theirs: Samples) -> dict[str, Any]:
    """The Server-Timing of the same calls through this proxy and the baseline's: the
    baseline's proxy-added p50 / p99, and per part (``proxy`` is the total) the ratio of the
    p50s and the median of the per-call ratios."""
    base = theirs.parts["proxy"]
    ratios = {
        name: (
            _p(mine, 0.5) / _p(theirs.parts[name], 0.5),
            statistics.median(
                a / b for a, b in zip(mine, theirs.parts[name], strict=True) if b > 0
            ),
        )
        for name, mine in ours.parts.items()
        if name in theirs.parts
    }
    return {
        "baseline": baseline,
        "baseline_proxy_added_p50": _p(base, 0.5),
        "baseline_proxy_added_p99": _p(base, 0.99),
        "baseline_ttft_proxy_p99": _p(theirs.ttft, 0.99),
        **_stretch("baseline_", theirs),
        **{
            f"baseline_{name}_p50": statistics.median(values)
            for name, values in theirs.parts.items()
            if name != "proxy"
        },
        "ratio_p50": ratios["proxy"][0],
        "ratio_per_call": ratios["proxy"][1],
        "part_ratios": {name: {"p50": a, "per_call": b} for name, (a, b) in ratios.items()},
    }


def _row(size: int, n: int, typed: bool, through: Samples, straight: Samples) -> dict[str, Any]:
    return {
        "content": "typed special-token text" if typed else "plain",
        "chars": size,
        "concurrency": n,
        "calls": len(through.ttft),
        "ttft_direct_p50": _p(straight.ttft, 0.5),
        "ttft_direct_p99": _p(straight.ttft, 0.99),
        "ttft_proxy_p50": _p(through.ttft, 0.5),
        "ttft_proxy_p99": _p(through.ttft, 0.99),
        "proxy_added_p50": _p(through.parts["proxy"], 0.5),
        "proxy_added_p99": _p(through.parts["proxy"], 0.99),
        **_stretch("", through),
        **{
            f"{name}_p50": statistics.median(values)
            for name, values in through.parts.items()
            if name != "proxy"
        },
        "routes": dict(through.routes),
        "slowest": _slowest(through),
    }


def _stretch(prefix: str, samples: Samples) -> dict[str, Any]:
    """The fresh-stretch calls' count and proxy-added p50 / p99."""
    added = list(itertools.compress(samples.parts.get("proxy", []), samples.stretch))
    return {
        f"{prefix}stretch_calls": len(added),
        f"{prefix}stretch_added_p50": _p(added, 0.5),
        f"{prefix}stretch_added_p99": _p(added, 0.99),
    }


def _slowest(samples: Samples, count: int = 3) -> list[dict[str, float]]:
    """The ``count`` calls of most proxy-added time, each with its Server-Timing parts."""
    total = samples.parts.get("proxy", [])
    order = sorted(range(len(total)), key=total.__getitem__, reverse=True)[:count]
    return [
        {name: values[i] for name, values in samples.parts.items() if i < len(values)}
        for i in order
    ]


def _format(row: dict[str, Any]) -> str:
    return (
        f"{row['content']:<24} {row['chars']:>9,} chars  N={row['concurrency']}  "
        f"{row['calls']:>3} calls | TTFT "
        f"direct p50 {row['ttft_direct_p50']:8.1f} p99 {row['ttft_direct_p99']:8.1f} ms | "
        f"via proxy p50 {row['ttft_proxy_p50']:6.1f} p99 {row['ttft_proxy_p99']:6.1f} ms | "
        f"proxy-added p50 {row['proxy_added_p50']:5.2f} p99 {row['proxy_added_p99']:6.2f} ms"
        f" ({row['stretch_calls']} fresh-stretch calls: p50 {row['stretch_added_p50']:.2f}"
        f" p99 {row['stretch_added_p99']:.2f} ms)"
        f" (read {row['read_p50']:.2f}, parse {row['parse_p50']:.2f}, render "
        f"{row['render_p50']:.2f}, tokenize {row['tokenize_p50']:.2f}) | "
        f"routes {row['routes']}\n    slowest: "
        + "; ".join(
            f"{call['proxy']:.1f} ms = "
            + " + ".join(f"{name} {call[name]:.1f}" for name in (*_STAGES, "rest") if name in call)
            for call in row["slowest"]
        )
        + (
            f"\n    vs {row['baseline']}: proxy-added p50 {row['baseline_proxy_added_p50']:.2f}"
            f" p99 {row['baseline_proxy_added_p99']:.2f} ms (fresh-stretch calls: p50"
            f" {row['baseline_stretch_added_p50']:.2f} p99 {row['baseline_stretch_added_p99']:.2f}"
            f" ms; TTFT via proxy p99"
            f" {row['baseline_ttft_proxy_p99']:.1f} ms), ratio {row['ratio_p50']:.2f}"
            f" (per-call median {row['ratio_per_call']:.2f})\n    per part, p50 ratio"
            f" (per-call median): "
            + ", ".join(
                f"{name} {r['p50']:.2f} ({r['per_call']:.2f})"
                for name, r in row["part_ratios"].items()
            )
            if "baseline" in row
            else ""
        )
    )


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as the README's table."""
    lines = [
        "| content | chars | N | calls | TTFT direct p50 / p99 ms | TTFT via proxy p50 / p99 ms "
        "| proxy-added p50 / p99 ms | fresh-stretch calls: proxy-added p50 / p99 ms "
        "| read / parse / render / tokenize p50 ms | routes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['content']} | {r['chars']:,} | {r['concurrency']} | {r['calls']} "
            f"| {r['ttft_direct_p50']:.0f} / {r['ttft_direct_p99']:.0f} "
            f"| {r['ttft_proxy_p50']:.1f} / {r['ttft_proxy_p99']:.1f} "
            f"| **{r['proxy_added_p50']:.2f}** / {r['proxy_added_p99']:.1f} "
            f"| {r['stretch_calls']}: {r['stretch_added_p50']:.1f} / {r['stretch_added_p99']:.1f} "
            f"| {r['read_p50']:.2f} / {r['parse_p50']:.2f} / {r['render_p50']:.2f} / "
            f"{r['tokenize_p50']:.2f} | {r['routes']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--calls", type=int, default=30, help="timed calls per session")
    parser.add_argument(
        "--direct-calls", type=int, default=5, help="of those, sent straight to the upstream too"
    )
    parser.add_argument(
        "--api",
        choices=tuple(_PATHS),
        default="chat",
        help="client API: OpenAI chat, or Anthropic messages with Claude Code's per-call "
        "billing line (an edit near the start of every call)",
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also run the proxy of git revision REV, every call sent to both (A/B in one run)",
    )
    parser.add_argument(
        "--fresh-every",
        type=int,
        default=20,
        help="every so many calls of a session bring a fresh stretch (0: none)",
    )
    parser.add_argument(
        "--fresh-chars", type=int, default=60_000, help="the fresh stretch's characters"
    )
    args = parser.parse_args()
    rows = run(
        [int(s) for s in args.sizes.split(",")],
        [int(n) for n in args.concurrency.split(",")],
        args.calls,
        args.direct_calls,
        args.api,
        args.baseline,
        (args.fresh_every, args.fresh_chars),
    )
    print(markdown(rows))
    out = ROOT / "loadtest" / "results" / f"replay-{args.api}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
