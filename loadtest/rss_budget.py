"""The proxy's resident memory (``toksplice_process_resident_bytes``) against its session
budget, after the large requests a hostile or unlucky client sends.

    python loadtest/rss_budget.py --tokenizer .assets/qwen3 [--sessions 1000]

Starts the stand-in upstream and ``toksplice serve``, then sends, in order: one request of
~50 MB of text, one ``'a' * 10_000_000`` request, and ``--sessions`` sessions of 100K
characters each; after each phase it prints the RSS and the store's bytes from ``/metrics``,
and the budget they stand against.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtest.processes import free_port, process, serve_args, standin_args

_WORDS = ("token", "splice", "agent", "tool", "result", "file", "line", "error", "def", "\n")


def _text(chars: int, seed: int) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS) + " "
        out.append(word)
        size += len(word)
    return "".join(out)[:chars]


def _figures(http: httpx.Client) -> dict[str, float]:
    wanted = ("toksplice_process_resident_bytes", "toksplice_session_store_bytes")
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(http.get("/metrics").text):
        for sample in family.samples:
            if sample.name in wanted:
                found[sample.name] = sample.value
    return found


def _report(phase: str, http: httpx.Client, budget: int) -> None:
    f = _figures(http)
    rss, store = f["toksplice_process_resident_bytes"], f["toksplice_session_store_bytes"]
    print(f"{phase:<34} RSS {rss / 2**20:8.0f} MiB   store {store / 2**20:7.0f} MiB   "
          f"budget {budget / 2**20:.0f} MiB", flush=True)  # fmt: skip


def _chat(http: httpx.Client, content: str, session: str) -> None:
    body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": content}]}
    reply = http.post("/v1/chat/completions", json=body, headers={"x-session-id": session})
    assert reply.status_code == 200, reply.text[:300]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer folder")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--store-bytes", type=int, default=1 << 30)
    args = parser.parse_args()
    up, port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up}"
    proxy = serve_args(upstream, args.tokenizer, "m", port, "--no-alignment-check",
                       "--store-bytes", str(args.store_bytes), "--shadow-rate", "0")  # fmt: skip
    with process(standin_args(args.tokenizer, up), upstream + "/health"), \
            process(proxy, f"http://127.0.0.1:{port}/health"), \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as http:  # fmt: skip
        _report("started", http, args.store_bytes)
        _chat(http, _text(50_000_000, 1), "big")
        _report("after a 50 MB request", http, args.store_bytes)
        _chat(http, "a" * 10_000_000, "word")
        _report("after 'a' * 10_000_000", http, args.store_bytes)
        for k in range(args.sessions):
            _chat(http, _text(100_000, 100 + k), f"s{k}")
        _report(f"after {args.sessions} sessions of 100K chars", http, args.store_bytes)


if __name__ == "__main__":
    main()
