"""Load and soak: N concurrent agent sessions for T minutes through the proxy.

    python loadtest/soak.py --upstream standin --sessions 8 --minutes 1 --chars 100000
    python loadtest/soak.py --upstream llamacpp --sessions 4 --minutes 1 --chars 12000

The proxy (``toksplice serve``) runs pinned to one core (``--proxy-core``, via ``taskset``);
this load generator and the upstream share another (``--client-core``).  Upstreams:

* ``standin``: ``standin_upstream.py --echo-digest``, which answers at once with a digest of the
  prompt ids it received: the proxy alone is measured, and after the run every call's digest is
  compared with the reference encode (``tokenizers``) of the rendered request: divergences;
* ``llamacpp``: a real llama.cpp server (SmolLM2-135M, ``app.tools.local_upstream``)
  generating a few tokens per call; its context is 8K tokens, so transcripts stay small there.

Each session is brought to ``--chars`` with one cold call before the clock starts, then
cycles through its next ``--span`` calls (~1.4K characters appended per call, tools, tool calls,
reasoning) and rewinds to the first of them, so transcripts stay between ``--chars`` and
``--chars`` + span * 1.4K for as long as the run lasts (the rewind is an edit near the end).
Sessions send their next call when the previous answer has ended, paced so that all together
offer ``--rate`` calls/s (``0``: as fast as answers come, which saturates the proxy's core and
measures its capacity, with queueing in the latency).

Printed, from one run: calls/s (all, and continuation calls: any route but full), proxy-added
p50/p99 (``Server-Timing: proxy``), the proxy's RSS over time (``/metrics``, every
``--sample-s``, printed as a table of minutes), errors, divergences, and the
shadow verifier's counters from ``/metrics`` when the proxy serves them (the proxy runs with
``TOKSPLICE_SHADOW_RATE=--shadow-rate``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.rendering import ChatTemplate  # noqa: E402
from app.tools import assets  # noqa: E402
from app.tools.local_upstream import LocalLlamaServer  # noqa: E402
from loadtest.agent_sessions import chat_requests, content_chars  # noqa: E402
from loadtest.processes import (  # noqa: E402
    free_port,
    process,
    serve_args,
    server_timing,
    standin_args,
)
from loadtest.standin_upstream import expected_answer  # noqa: E402

MODEL = "soak"
_RSS = re.compile(r"^toksplice_process_resident_bytes\s+([0-9.eE+-]+)$", re.M)
_SHADOW = re.compile(r"^(toksplice_shadow_\w+_total)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", re.M)


@dataclass
class Results:
    routes: Counter[str] = field(default_factory=Counter)
    proxy_ms: list[float] = field(default_factory=list)
    """Proxy-added ms of continuation calls."""
    errors: Counter[str] = field(default_factory=Counter)
    answers: list[tuple[int, int, str]] = field(default_factory=list)
    """(session, call index, answer text) of every call, checked after the run."""
    rss_mb: list[tuple[float, float]] = field(default_factory=list)
    cpu_s: float = 0.0
    """CPU seconds the proxy used during the timed window."""


def session_bodies(seed: int, chars: int, span: int, upstream: str) -> list[bytes]:
    """The call that brings the session to ``chars``, then the next ``span`` calls, as request
    bodies (streamed; a few generated tokens on a real upstream)."""
    bodies = []
    for body in chat_requests(seed, target_chars=chars * 4, model=MODEL, stream=True):
        if content_chars(body["messages"]) >= chars:
            body["max_tokens"] = 4 if upstream == "llamacpp" else 16
            # Special-token lookalikes in tool output are defused (as in replay.py's "plain"):
            # the reference below encodes the rendered text with special matching on.
            bodies.append(orjson.dumps(body).replace(b"<|", b"< |"))
            if len(bodies) == span + 1:
                return bodies
    raise ValueError(f"session {seed} ended before {span + 1} calls past {chars} characters")


async def call(client: httpx.AsyncClient, body: bytes, seed: int) -> tuple[str, str, float]:
    """(answer text, route, proxy-added ms) of one streamed call."""
    headers = {"content-type": "application/json", "x-session-id": f"soak-{seed}"}
    async with client.stream("POST", "/v1/chat/completions", content=body, headers=headers) as r:
        if r.status_code != 200:
            raise RuntimeError(f"status {r.status_code}: {(await r.aread())[:200]!r}")
        text = []
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                choice = (orjson.loads(line[6:]).get("choices") or [{}])[0]
                text.append((choice.get("delta") or {}).get("content") or "")
        return (
            "".join(text),
            r.headers.get("x-toksplice-route", "?"),
            server_timing(r.headers).get("proxy", 0.0),
        )


async def drive(
    url: str,
    sessions: dict[int, list[bytes]],
    seconds: float,
    rate: float,
    results: Results,
    pid: int,
    sample_s: float,
) -> float:
    """Warm every session (untimed), then run them for ``seconds``, all together at ``rate``
    calls/s (0: each as fast as it gets answers), the proxy's RSS read every ``sample_s``;
    returns the elapsed time."""
    limits = httpx.Limits(max_connections=len(sessions) + 4)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        await asyncio.gather(*(call(client, bodies[0], s) for s, bodies in sessions.items()))
        started = time.perf_counter()
        deadline = started + seconds
        cpu_before = cpu_s(pid)

        interval = len(sessions) / rate if rate else 0.0

        async def run(seed: int, bodies: list[bytes]) -> None:
            k = 0
            next_at = started + interval * (seed % len(sessions)) / len(sessions)
            while time.perf_counter() < deadline:
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
                next_at += interval
                k = k % (len(bodies) - 1) + 1
                try:
                    text, route, proxy_ms = await call(client, bodies[k], seed)
                except (RuntimeError, httpx.HTTPError) as exc:
                    results.errors[type(exc).__name__ + ": " + str(exc)[:80]] += 1
                    continue
                results.routes[route] += 1
                results.answers.append((seed, k, text))
                if route in ("append", "edit", "hit", "pieces"):
                    results.proxy_ms.append(proxy_ms)

        async def sample_rss() -> None:
            while time.perf_counter() < deadline:
                results.rss_mb.append((time.perf_counter() - started, await rss_mb(client)))
                await asyncio.sleep(min(sample_s, max(0.0, deadline - time.perf_counter())))

        await asyncio.gather(sample_rss(), *(run(s, b) for s, b in sessions.items()))
        elapsed = time.perf_counter() - started
        results.cpu_s = cpu_s(pid) - cpu_before
        results.rss_mb.append((elapsed, await rss_mb(client)))
        return elapsed


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def rss_mb(client: httpx.AsyncClient) -> float:
    """The proxy's own RSS in MiB, as its ``/metrics`` reports it."""
    found = _RSS.search((await client.get("/metrics")).text)
    return float(found.group(1)) / 2**20 if found else float("nan")


def divergences(folder: Path, sessions: dict[int, list[bytes]], results: Results) -> int:
    """Calls whose prompt digest differs from the reference encode of the rendered request."""
    template = ChatTemplate.from_tokenizer_config(folder / "tokenizer_config.json")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    expected: dict[tuple[int, int], str] = {}
    bad = 0
    for seed, k, text in results.answers:
        if (seed, k) not in expected:
            body = orjson.loads(sessions[seed][k])
            expected[seed, k] = expected_answer(template, tokenizer, body)
        bad += text != expected[seed, k]
    return bad


def shadow_counters(url: str) -> dict[str, float] | None:
    try:
        reply = httpx.get(url + "/metrics", timeout=5)
    except httpx.HTTPError:
        return None
    if reply.status_code != 200:
        return None
    counters: dict[str, float] = {}
    for name, value in _SHADOW.findall(reply.text):
        counters[name] = counters.get(name, 0.0) + float(value)
    return counters


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def run(args: argparse.Namespace) -> dict[str, Any]:
    files = assets.fetch()
    folder = (files["qwen3"] if args.upstream == "standin" else files["smollm2"]).parent
    seeds = range(1000, 1000 + args.sessions)
    sessions = {s: session_bodies(s, args.chars, args.span, args.upstream) for s in seeds}
    os.sched_setaffinity(0, {args.client_core})  # the upstream started below inherits it
    proxy_port = free_port()
    proxy = f"http://127.0.0.1:{proxy_port}"
    results = Results()
    with ExitStack() as stack:
        if args.upstream == "standin":
            up_port = free_port()
            upstream = f"http://127.0.0.1:{up_port}"
            stack.enter_context(
                process(
                    standin_args(folder, up_port, "--echo-digest"),
                    upstream + "/health",
                )
            )
        else:
            server = stack.enter_context(
                LocalLlamaServer(
                    files["smollm2_gguf"],
                    n_ctx=8192 * args.sessions,
                    n_parallel=args.sessions,
                    threads=1,
                )
            )
            upstream = server.url
        proc = stack.enter_context(
            process(
                [
                    "taskset",
                    "-c",
                    str(args.proxy_core),
                    *serve_args(upstream, folder, MODEL, proxy_port, "--store", args.store),
                ],
                proxy + "/health",
                env={"TOKSPLICE_SHADOW_RATE": str(args.shadow_rate), "TOKSPLICE_SHADOW_CPU": "1"},
            )
        )
        elapsed = asyncio.run(
            drive(proxy, sessions, args.minutes * 60, args.rate, results, proc.pid, args.sample_s)
        )
        shadow = shadow_counters(proxy)
    checked = divergences(folder, sessions, results) if args.upstream == "standin" else None
    calls = sum(results.routes.values())
    continuation = len(results.proxy_ms)
    rss = [mb for _, mb in results.rss_mb]
    return {
        "upstream": args.upstream,
        "sessions": args.sessions,
        "rate": args.rate,
        "chars": args.chars,
        "seconds": round(elapsed, 1),
        "calls": calls,
        "calls_per_s": calls / elapsed,
        "continuation_per_s": continuation / elapsed,
        "proxy_cpu_ms_per_call": 1e3 * results.cpu_s / max(1, calls),
        "calls_per_core_s": calls / results.cpu_s if results.cpu_s else float("nan"),
        "proxy_p50_ms": pct(results.proxy_ms, 50),
        "proxy_p99_ms": pct(results.proxy_ms, 99),
        "rss_mb_start": rss[0] if rss else float("nan"),
        "rss_mb_max": max(rss) if rss else float("nan"),
        "rss_mb_end": rss[-1] if rss else float("nan"),
        "rss_mb_series": [(round(t), round(mb)) for t, mb in results.rss_mb],
        "errors": sum(results.errors.values()),
        "error_kinds": dict(results.errors),
        "divergences": checked,
        "shadow": shadow,
        "routes": dict(results.routes),
        "store": args.store,
        "shadow_rate": args.shadow_rate,
    }


def markdown_row(r: dict[str, Any]) -> str:
    div = "n/a" if r["divergences"] is None else str(r["divergences"])
    shadow = "n/a" if not r["shadow"] else ", ".join(f"{k}={v:g}" for k, v in r["shadow"].items())
    return (
        f"| {r['upstream']} | {r['store'].split('://')[0]} | {r['sessions']} "
        f"| {r['rate'] or 'max'} | {r['chars']:,} "
        f"| {r['seconds']:.0f} | {r['calls']} | {r['calls_per_s']:.0f} "
        f"| **{r['continuation_per_s']:.0f}** | {r['proxy_cpu_ms_per_call']:.2f} "
        f"({r['calls_per_core_s']:.0f}) "
        f"| **{r['proxy_p50_ms']:.2f}** / {r['proxy_p99_ms']:.1f} "
        f"| {r['rss_mb_start']:.0f} / {r['rss_mb_max']:.0f} / {r['rss_mb_end']:.0f} "
        f"| {r['errors']} | {div} | {shadow} | {r['routes']} |"
    )


HEADER = (
    "| upstream | store | sessions | offered calls/s | chars | s | calls | calls/s "
    "| continuation calls/s "
    "| proxy CPU ms/call (calls per CPU-s) | proxy-added p50 / p99 ms "
    "| RSS MiB start / max / end | errors | divergences | shadow verifier | routes |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--upstream", choices=("standin", "llamacpp"), default="standin")
    parser.add_argument("--sessions", type=int, default=8, help="concurrent sessions")
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument(
        "--rate", type=float, default=0.0, help="calls/s offered in all (0: closed loop)"
    )
    parser.add_argument("--chars", type=int, default=100_000, help="transcript size")
    parser.add_argument("--span", type=int, default=30, help="calls per cycle of a session")
    parser.add_argument("--proxy-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--shadow-rate", type=float, default=1.0)
    parser.add_argument("--store", default="memory", help="memory or a Redis URL")
    parser.add_argument(
        "--sample-s", type=float, default=60.0, help="seconds between RSS samples (/metrics)"
    )
    args = parser.parse_args()
    row = run(args)
    print(json.dumps({k: v for k, v in row.items() if k != "rss_mb_series"}, indent=1))
    print("| minute | RSS MiB |\n|---|---|")
    for t, mb in row["rss_mb_series"]:
        print(f"| {t / 60:.1f} | {mb} |")
    print(HEADER)
    print(markdown_row(row))
    out = ROOT / "loadtest" / "results" / f"soak-{args.upstream}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
