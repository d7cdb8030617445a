"""The proxy's resident memory (``toksplice_process_resident_bytes``) against its session budget,
after the large requests a hostile or unlucky client sends.

    python loadtest/rss_budget.py --tokenizer .assets/qwen3 [--sessions 1000] [--edits 300]

Starts the stand-in upstream and ``toksplice serve``, then sends, in order: one request of ~50
MB of text, one ``'a' * 10_000_000`` request, ``--sessions`` sessions of 100K characters each,
``--at-once`` clients at a time sending sessions of 50K characters of varied words (each
encoded whole on whichever of the service's worker threads serves it), and ``--edits`` calls of
one 1M-character session whose first line changes every call (Claude Code's billing line: each
call's ids are a copy, not an extension, of the call's before, and nothing that outlives a call
may keep them); after each phase it prints the RSS and the store's bytes from ``/metrics``
against the bound ``--store-bytes`` + F (``--overhead``, default ``app.process_memory``'s
``FIXED_OVERHEAD_BYTES``), and exits 1 when RSS exceeded it.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.process_memory import FIXED_OVERHEAD_BYTES
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


def _varied(chars: int, seed: int) -> str:
    """Words of 3 to 24 random letters: unlike ``_text``'s, most of its pieces differ, and a
    piece cache holding them fills."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ("".join(rng.choices(letters, k=rng.randint(3, 24))) for _ in range(chars))
    return " ".join(words)[:chars]


def _figures(http: httpx.Client) -> tuple[float, float]:
    """(RSS, the session store's bytes) from ``/metrics``."""
    wanted = ("toksplice_process_resident_bytes", "toksplice_session_store_bytes")
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(http.get("/metrics").text):
        for sample in family.samples:
            if sample.name in wanted:
                found[sample.name] = sample.value
    return found[wanted[0]], found[wanted[1]]


def _chat(http: httpx.Client, content: str, session: str) -> None:
    body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": content}]}
    reply = http.post("/v1/chat/completions", json=body, headers={"x-session-id": session})
    assert reply.status_code == 200, reply.text[:300]


def measure(
    tokenizer: Path,
    store_bytes: int,
    *,
    big_chars: int = 50_000_000,
    word_chars: int = 10_000_000,
    sessions: int = 1000,
    session_chars: int = 100_000,
    at_once: int = 40,
    at_once_chars: int = 50_000,
    edits: int = 300,
    edited_chars: int = 1_000_000,
) -> Iterator[tuple[str, float, float]]:
    """(phase, RSS, store bytes) at the start and after each phase, through a proxy of
    ``store_bytes``: one request of ``big_chars`` of text, one of ``'a' * word_chars``,
    ``sessions`` sessions of ``session_chars`` each, ``at_once`` clients at a time sending three
    sessions of ``at_once_chars`` each, ``edits`` calls of one session of ``edited_chars``
    edited at its start."""
    up, port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up}"
    proxy = serve_args(upstream, tokenizer, "m", port, "--no-alignment-check",
                       "--store-bytes", str(store_bytes), "--shadow-rate", "0")  # fmt: skip
    with process(standin_args(tokenizer, up), upstream + "/health"), \
            process(proxy, f"http://127.0.0.1:{port}/health"), \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as http:  # fmt: skip
        yield "started", *_figures(http)
        _chat(http, _text(big_chars, 1), "big")
        yield f"after a {big_chars / 1e6:g} MB request", *_figures(http)
        _chat(http, "a" * word_chars, "word")
        yield f"after 'a' * {word_chars:_}", *_figures(http)
        for k in range(sessions):
            _chat(http, _text(session_chars, 100 + k), f"s{k}")
        yield f"after {sessions} sessions of {session_chars / 1e3:g}K chars", *_figures(http)
        with ThreadPoolExecutor(at_once) as clients:
            calls = [(_varied(at_once_chars, 5000 + k), f"c{k}") for k in range(3 * at_once)]
            list(clients.map(lambda call: _chat(http, *call), calls))
        yield f"after {at_once} clients at once", *_figures(http)
        edited = _text(edited_chars, 2)
        for k in range(edits):
            _chat(http, f"billing line {k}\n{edited}", "edited")
        yield f"after {edits} edits at {edited_chars / 1e6:g}M chars", *_figures(http)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer folder")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--at-once", type=int, default=40)
    parser.add_argument("--edits", type=int, default=300)
    parser.add_argument("--store-bytes", type=int, default=1 << 30)
    parser.add_argument(
        "--overhead", type=int, default=FIXED_OVERHEAD_BYTES, help="F: RSS allowed past the budget"
    )
    args = parser.parse_args()
    bound = args.store_bytes + args.overhead
    over = False
    for phase, rss, store in measure(
        args.tokenizer,
        args.store_bytes,
        sessions=args.sessions,
        at_once=args.at_once,
        edits=args.edits,
    ):
        over |= rss > bound
        print(f"{phase:<34} RSS {rss / 2**20:6.0f} MiB   store {store / 2**20:5.0f} MiB   "
              f"budget + F {bound / 2**20:.0f} MiB{'   EXCEEDED' if rss > bound else ''}",
              flush=True)  # fmt: skip
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
