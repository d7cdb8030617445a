"""Cold starts on the CPU: one piece vs stable-cut chunks encoded in parallel, in one run.

    python loadtest/bench_cold_start.py [--tokenizers qwen3,llama3,o200k] [--sizes ...]
                                        [--repeat 5] [--chunk 32768] [--threads N]

For each tokenizer and size, a generated agent transcript (``loadtest/agent_sessions``) is
encoded as a cold start (a new session) by two session tokenizers: one with
``parallel_chunk=0`` (the whole text in one reference encode, as before chunking) and one with
``--chunk``.  The two alternate ``--repeat`` times; printed per row are both medians, their
ratio and the chunk count, and every result is checked against the reference's ids (a
mismatch exits 1).  ``--threads`` sets ``RAYON_NUM_THREADS`` (the engine's pool, read once at
start); by default the pool has one thread per core this process may run on.

``--engines`` compares encoders on the same texts instead: the reference, the native encoder
(``app/tokenization/native``), and the peers of ``peer_encoders`` that cover the tokenizer
(fastokens, gigatoken; tiktoken: cl100k, o200k; bpe-qwen: Qwen3; ``pip install -e
'.[bench]'``), on the ``--texts`` kinds (``transcript``, ``source``: Python source,
``multilingual``: eleven languages' sentences), each on one thread (the whole text) and on all
cores (the stable-cut chunks: ours through ``ChunkedEncoder``, the peers' own batch calls),
with each one's divergences from the reference on the same ``--adversarial`` random
adversarial strings (``tests/adversarial_strings``) printed beside its speed; the native
encoder's declined strings (sent to the reference) are counted apart; ``--one-piece SIZES``
adds the native encoder's CPU time on ``'a' * size`` (one piece); ``--idle S`` sleeps ``S``
seconds before each timed encode (a proxy's cold start comes after idle time, not right
after another encode).  Each engine has a row
per thread count, with its median wall time, MB/s and ratio to the reference's one thread,
then the same of CPU time (the process's, all threads): on a loaded machine the wall clock
counts the waits for a core, CPU time what the encode itself costs.  A last table gives each
engine's one-core figure per text kind (the CPU MB/s of its one-thread encode of the largest
size) beside its divergences: ``--engines --texts source,multilingual --sizes 1000000``
is the table of docs/benchmarks.md.

``--proxy`` measures the same through HTTP instead (with ``--engines``: both proxies chunked,
one ``--cpu-encoder native``, the other ``reference``): the stand-in upstream (answering with a
digest of the ids it got) and two ``toksplice serve`` processes, ``--parallel-chunk CHUNK``
and ``0``, side by side; each first call of a new session (a new generated transcript of the
size, Qwen3, its special-token lookalikes defused, under an API key of its own so that it
matches no earlier call's content) goes to both, alternating which goes first;
printed are the proxy-added p50s (``Server-Timing``), their ratio and the routes, and every
answer's digest is checked against the reference encode of the rendered request.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _transcript(name: str, size: int) -> str:
    from loadtest.agent_sessions import MARKUPS, session_calls

    text = ""
    for text in session_calls(17, MARKUPS[name], target_chars=size + 100_000):
        if len(text) >= size:
            break
    return text


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokenizers", default="qwen3,llama3,o200k,deepseek_v3")
    parser.add_argument("--sizes", default="100000,1000000,4000000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=32 << 10, help="parallel_chunk (bytes)")
    parser.add_argument("--threads", type=int, help="RAYON_NUM_THREADS for the engine's pool")
    parser.add_argument("--proxy", action="store_true", help="first calls through two proxies")
    parser.add_argument("--engines", action="store_true", help="encoders side by side")
    parser.add_argument("--adversarial", type=int, default=3000, help="strings per tokenizer")
    parser.add_argument(
        "--texts",
        default="transcript",
        help="with --engines: text kinds (transcript, source, multilingual)",
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=0.0,
        help="with --engines: seconds asleep before each timed encode",
    )
    parser.add_argument(
        "--one-piece",
        default="",
        help="with --engines: sizes of 'a' * size (one piece) to time the native encoder on",
    )
    args = parser.parse_args()
    if args.threads:
        os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    if args.proxy:
        failed = proxy_rows(args)
    elif args.engines:
        from loadtest.bench_engines import engine_rows

        failed = engine_rows(args, _transcript)
    else:
        failed = tokenizer_rows(args)
    if failed:
        raise SystemExit(1)


def tokenizer_rows(args: argparse.Namespace) -> bool:
    """The session tokenizer's cold starts, one piece vs chunks; True if any id differed."""
    from app.sessions import SessionTokenizer
    from app.tokenization.boundaries import CutRules
    from app.tokenization.chunked import ChunkedEncoder
    from app.tools import assets

    cores = len(os.sched_getaffinity(0))
    print(f"cores this process may use: {cores}; RAYON_NUM_THREADS={args.threads or 'unset'}")
    print("| tokenizer | chars | MB | one piece ms | chunks ms | ratio | chunks | chunked MB/s |")
    print("|---|---|---|---|---|---|---|---|")
    failed = False
    for name in args.tokenizers.split(","):
        path = assets.tokenizer_file(name)
        whole = SessionTokenizer.from_file(path, parallel_chunk=0)
        chunked = SessionTokenizer.from_file(path, parallel_chunk=args.chunk)
        rules = CutRules(chunked.spec)
        for size in (int(s) for s in args.sizes.split(",")):
            text = _transcript(name, size)
            data = text.encode("utf-8")
            expected = whole.reference.tokenizer.encode(text, add_special_tokens=False).ids
            times: dict[str, list[float]] = {"one": [], "chunks": []}
            for round_ in range(args.repeat):
                for label, tok in (("one", whole), ("chunks", chunked)):
                    session = f"bench{round_}/{label}"  # its own tenant: no content match
                    started = time.perf_counter()
                    enc = tok.encode(text, session=session)
                    times[label].append(time.perf_counter() - started)
                    tok.forget(session)
                    if enc.route != "full" or list(enc.ids) != expected:
                        print(f"MISMATCH: {name} {size} {label} route {enc.route}")
                        failed = True
            one, parts = (statistics.median(times[k]) * 1e3 for k in ("one", "chunks"))
            pieces = len(ChunkedEncoder(chunked.reference, rules, args.chunk).cuts(data)) - 1
            print(
                f"| {name} | {len(text):,} | {len(data) / 1e6:.2f} | {one:.0f} | {parts:.0f} "
                f"| {parts / one:.2f} | {pieces} | {len(data) / parts / 1e3:.1f} |",
                flush=True,
            )
    return failed


def proxy_rows(args: argparse.Namespace) -> bool:
    """First calls of new sessions through two proxies; True if any answer's digest differed."""
    import contextlib

    import httpx
    import orjson
    from tokenizers import Tokenizer

    from app.rendering import ChatTemplate
    from app.tools import assets
    from loadtest.agent_sessions import chat_requests, content_chars
    from loadtest.processes import (
        free_port,
        process,
        serve_args,
        server_timing,
        standin_args,
    )
    from loadtest.standin_upstream import expected_answer

    folder = assets.fetch()["qwen3"].parent
    template = ChatTemplate.from_tokenizer_config(folder / "tokenizer_config.json")
    reference = Tokenizer.from_file(str(folder / "tokenizer.json"))
    up_port = free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    mine, theirs = ("native", "reference") if args.engines else ("chunks", "one piece")
    print(f"| chars | calls | {mine}: proxy-added p50 ms | {theirs}: p50 ms | ratio | routes |")
    print("|---|---|---|---|---|---|")
    failed = False
    with contextlib.ExitStack() as stack, httpx.Client(timeout=600) as client:
        stack.enter_context(
            process(standin_args(folder, up_port, "--echo-digest"), upstream + "/health")
        )
        urls = {}
        # --engines: both chunked, "chunks" native and "one" the reference; else both native,
        # "chunks" chunked and "one" in one piece.
        for label, chunk, engine in (
            ("chunks", args.chunk, "native"),
            ("one", args.chunk if args.engines else 0, "reference" if args.engines else "native"),
        ):
            port = free_port()
            extra = ("--parallel-chunk", str(chunk), "--shadow-rate", "0", "--cpu-encoder", engine)
            url = f"http://127.0.0.1:{port}"
            stack.enter_context(
                process(serve_args(upstream, folder, "qwen3", port, *extra), url + "/health")
            )
            urls[label] = url + "/v1/chat/completions"
        for size in (int(s) for s in args.sizes.split(",")):
            added: dict[str, list[float]] = {"chunks": [], "one": []}
            routes: dict[str, int] = {}
            for round_ in range(args.repeat):
                order = ("chunks", "one") if round_ % 2 else ("one", "chunks")
                for label in order:
                    seed = size // 1000 + 2 * round_ + (label == "one")
                    chat = next(
                        b
                        for b in chat_requests(seed, target_chars=size * 2, model="qwen3")
                        if content_chars(b["messages"]) >= size
                    )
                    # Special-token lookalikes defused (as replay.py does): the plain path.
                    raw = orjson.dumps(chat | {"stream": False}).replace(b"<|", b"< |")
                    body = orjson.loads(raw)
                    headers = {
                        "content-type": "application/json",
                        "x-session-id": f"s{seed}",
                        # A tenant (API key) per call: no content match with earlier calls.
                        "authorization": f"Bearer bench-{seed}",
                    }
                    reply = client.post(urls[label], content=raw, headers=headers)
                    reply.raise_for_status()
                    answer = reply.json()["choices"][0]["message"]["content"]
                    if answer != expected_answer(template, reference, body):
                        print(f"MISMATCH: {size} {label} seed {seed}")
                        failed = True
                    added[label].append(server_timing(reply.headers)["proxy"])
                    route = f"{label}:{reply.headers['x-toksplice-route']}"
                    routes[route] = routes.get(route, 0) + 1
            mine, theirs = (statistics.median(added[k]) for k in ("chunks", "one"))
            print(
                f"| {size:,} | {args.repeat} | {mine:.0f} | {theirs:.0f} | {mine / theirs:.2f} "
                f"| {routes} |",
                flush=True,
            )
    return failed


if __name__ == "__main__":
    main()
