"""The event loop's worst stall while one hostile request runs: ``/health/live`` is polled at
20 Hz meanwhile, and the longest a poll waited for its answer is the figure.

    python loadtest/event_loop_gaps.py [--tokenizer .assets/smollm2]

``idle`` (no request) is the baseline: what the machine's own load alone makes a poll wait.
``--against DIR`` (a checkout of another commit, its C extensions built) runs each request
against that checkout's proxy too, interleaved with this one's, ``--rounds`` times: the two
columns then share the machine's load.
The requests (issue 37, item 3), each against a proxy of its own started as a separate
process (``toksplice serve``) in front of the stand-in upstream served here:

* ``append-10M``: a session's second call appends a message of ``'a' * 10_000_000`` (the body
  extends the first call's, so it is a continuation), with the native and the reference
  encoder;
* ``quotes-53MB``: a 53 MB body whose one string is escaped quotes (``\\"`` x 26M);
* ``malformed-60MB``: a 60 MB body of 6,000 messages, valid but for one byte near its end
  (a 400 naming its position);
* ``nested-600``: a 60 MB body whose message nests 600 levels (a 400);
* ``stops-10k``: ``vllm-generate`` with 10,000 stop strings that share 60 characters with
  each other and with the answer, streamed and whole (400,000 characters of answer).

``tests/api/test_event_loop_gaps.py`` runs the same requests and checks a wide bound.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

MODEL = "m"
POLL_S = 0.05
STOPS = [f"{'a' * 60}{k:05d}" for k in range(10_000)]
"""10,000 stop strings, none in the answer, each beginning as every "a" of it does."""
ANSWER_IDS_PER_EVENT = 1000


class LoopWatch:
    """Polls ``/health/live`` every ``POLL_S`` from a thread of its own; ``worst_s`` is the
    longest a poll waited for its answer (the event loop answers it at once when free).

    Entering returns once a first poll is answered and leaving waits for a poll sent after
    the block ended, so the polls cover the whole block however short it was."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.worst_s = 0.0
        self.polls = 0
        self._stop = threading.Event()
        self._answered = threading.Condition()
        self._ended = False
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> LoopWatch:
        self._thread.start()
        self._wait_for_polls(1)
        return self

    def __exit__(self, *_: object) -> None:
        self._wait_for_polls(self.polls + 2)  # the one in flight may have been sent before
        failed = self._ended
        self._stop.set()
        self._thread.join()
        assert not failed, "a /health/live poll failed (its traceback is above)"

    def _wait_for_polls(self, count: int) -> None:
        with self._answered:
            self._answered.wait_for(lambda: self.polls >= count or self._ended)

    def _poll(self) -> None:
        try:
            with httpx.Client(base_url=self.url, timeout=60) as http:
                while not self._stop.is_set():
                    started = time.perf_counter()
                    assert http.get("/health/live").status_code == 200
                    waited = time.perf_counter() - started
                    with self._answered:
                        self.worst_s, self.polls = max(self.worst_s, waited), self.polls + 1
                        self._answered.notify_all()
                    self._stop.wait(max(0.0, POLL_S - waited))
        finally:
            with self._answered:
                self._ended = True  # a failed poll ends the waits too
                self._answered.notify_all()


def upstream_app(answer_ids: list[int]) -> Starlette:
    """llama.cpp's ``/v1/completions`` (a short answer) and vLLM's generate API (answering
    ``answer_ids``, streamed ``ANSWER_IDS_PER_EVENT`` a time, or whole)."""

    async def completions(request: Request) -> Response:
        body = orjson.loads(await request.body())
        choice = {"index": 0, "text": "Hello.", "finish_reason": "stop"}
        answer = {"choices": [choice], "usage": {"completion_tokens": 2}}
        if not body.get("stream"):
            return Response(orjson.dumps(answer), media_type="application/json")
        return _sse([answer])

    async def generate(request: Request) -> Response:
        body = orjson.loads(await request.body())
        slices = range(0, len(answer_ids), ANSWER_IDS_PER_EVENT)
        events: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "token_ids": answer_ids[k : k + ANSWER_IDS_PER_EVENT],
                          "finish_reason": None}]}
            for k in slices
        ]  # fmt: skip
        done = {"choices": [{"index": 0, "token_ids": [], "finish_reason": "length"}]}
        if not body.get("stream"):
            whole = {"choices": [{"index": 0, "token_ids": answer_ids, "finish_reason": "length"}]}
            return Response(orjson.dumps(whole), media_type="application/json")
        return _sse([*events, done])

    return Starlette(
        routes=[
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/inference/v1/generate", generate, methods=["POST"]),
        ]
    )


def _sse(payloads: list[dict[str, Any]]) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        for payload in payloads:
            yield b"data: " + orjson.dumps(payload) + b"\n\n"
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def _post(http: httpx.Client, body: dict[str, Any], **headers: str) -> httpx.Response:
    """A JSON POST, encoded by orjson (httpx's own encoder holds this process's GIL for a
    while on a 10 MB body: the in-process test would measure its client)."""
    headers["content-type"] = "application/json"
    return http.post("/v1/chat/completions", content=orjson.dumps(body), headers=headers)


def idle(http: httpx.Client) -> None:
    """No request for 5 s: what the machine's own load makes a poll wait."""
    time.sleep(5)


def append_10m(http: httpx.Client) -> None:
    """A session's first call, then its continuation appending a 10M-character message."""
    session = {"x-session-id": "big-append"}
    first = [{"role": "user", "content": "Hi."}]
    body = {"model": MODEL, "messages": first}
    assert _post(http, body, **session).status_code == 200
    grown = [*first, {"role": "assistant", "content": "Hello."},
             {"role": "user", "content": "a" * 10_000_000}]  # fmt: skip
    reply = _post(http, body | {"messages": grown}, **session)
    assert reply.status_code == 200, reply.text[:300]
    assert reply.headers["x-toksplice-route"] not in ("full", "gpu"), reply.headers


def quotes_53mb(http: httpx.Client) -> None:
    """A 53 MB body of escaped quotes, for a model not served: its parse is all it costs."""
    body = {"model": "not-served", "messages": [{"role": "user", "content": '"' * 26_000_000}]}
    reply = _post(http, body)
    assert int(reply.request.headers["content-length"]) > 52_000_000
    assert reply.status_code == 404, reply.text[:300]


def _post_chunks(http: httpx.Client, chunks: Iterator[bytes]) -> httpx.Response:
    """A body sent as it is made, a chunk at a time (joining 60 MB would hold this process's
    GIL, and its poller with it, for longer than the proxy does)."""
    return http.post(
        "/v1/chat/completions", content=chunks, headers={"content-type": "application/json"}
    )


def malformed_60mb(http: httpx.Client) -> None:
    """A 60 MB body of 6,000 messages, valid but for one byte near its end."""
    message = orjson.dumps({"role": "user", "content": "word " * 2000})
    bad = message.replace(b"word", b"wo\x01d", 1)  # a control character in its text

    def chunks() -> Iterator[bytes]:
        yield b'{"model": "m", "messages": ['
        yield from itertools.repeat(message + b",", 5999)
        yield bad + b"]}"

    assert len(message) * 6000 > 60_000_000
    reply = _post_chunks(http, chunks())
    assert reply.status_code == 400, reply.text[:300]
    assert "unexpected control character in string: line 1 column" in reply.text, reply.text


def nested_600(http: httpx.Client) -> None:
    """A 60 MB body whose message nests 600 levels around a 60 MB string."""

    def chunks() -> Iterator[bytes]:
        yield b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", '
        yield b'"text": "x", "x": ' + b"[" * 600 + b'"'
        yield from itertools.repeat(b"a" * 1_000_000, 60)
        yield b'"' + b"]" * 600 + b"}]}]}"

    reply = _post_chunks(http, chunks())
    assert reply.status_code == 400, reply.text[:300]
    assert "nested too deeply" in reply.text, reply.text


def stops_10k(http: httpx.Client) -> None:
    """``vllm-generate`` with 10,000 stop strings, the answer streamed and then whole."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Go."}], "stop": STOPS}
    with http.stream("POST", "/v1/chat/completions", json=body | {"stream": True}) as reply:
        assert reply.status_code == 200
        data = [line for line in reply.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "data: [DONE]" and '"finish_reason":"length"' in data[-2], data[-2:]
    whole = _post(http, body)
    assert whole.status_code == 200, whole.text[:300]
    assert whole.json()["choices"][0]["message"]["content"] == "ba" * 200_000


SCENARIOS: dict[str, tuple[dict[str, str], Callable[[httpx.Client], None]]] = {
    "idle": ({"dialect": "llamacpp"}, idle),
    "append-10M native": ({"dialect": "llamacpp", "cpu_encoder": "native"}, append_10m),
    "append-10M reference": ({"dialect": "llamacpp", "cpu_encoder": "reference"}, append_10m),
    "quotes-53MB": ({"dialect": "llamacpp"}, quotes_53mb),
    "malformed-60MB": ({"dialect": "llamacpp"}, malformed_60mb),
    "nested-600": ({"dialect": "llamacpp"}, nested_600),
    "stops-10k": ({"dialect": "vllm-generate"}, stops_10k),
}
"""Each request, with the proxy settings it runs under."""


def answer_ids(tokenizer: Path) -> list[int]:
    """The stop scenario's answer: "ba" * 200,000 as ids (every "a" begins all 10,000 stop
    strings, every "b" ends that)."""
    from tokenizers import Tokenizer

    folder = tokenizer if tokenizer.is_dir() else tokenizer.parent
    encoded = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(
        "ba" * 200_000, add_special_tokens=False
    )
    return list(encoded.ids)


@contextlib.contextmanager
def serving(app: Starlette) -> Iterator[str]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def proxy_process(
    upstream: str, tokenizer: Path, options: dict[str, str], root: Path = ROOT
) -> Iterator[str]:
    """``toksplice serve`` of the checkout at ``root`` in a process of its own; yields its URL
    once it answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
    command = [sys.executable, "-m", "app", "serve", f"--upstream={upstream}",
               f"--tokenizer={tokenizer.resolve()}", f"--model={MODEL}", f"--port={port}",
               "--no-alignment-check", "--shadow-rate=0", *flags]  # fmt: skip
    process = subprocess.Popen(command, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health/live", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the proxy did not start")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", type=Path, default=Path(".assets/smollm2"))
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--against", type=Path, help="another checkout, run interleaved")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    roots = [("", ROOT)] if args.against is None else [("this", ROOT), ("other", args.against)]
    with serving(upstream_app(answer_ids(args.tokenizer))) as upstream:
        for name, (options, run) in SCENARIOS.items():
            if args.only and name not in args.only:
                continue
            for _, (label, root) in itertools.product(range(args.rounds), roots):
                with (
                    proxy_process(upstream, args.tokenizer, options, root) as url,
                    httpx.Client(base_url=url, timeout=600) as http,
                    LoopWatch(url) as watch,
                ):
                    started = time.perf_counter()
                    run(http)
                    took = time.perf_counter() - started
                print(
                    f"{name:22s} {label:5s} request {took:6.2f} s   worst /health/live wait "
                    f"{watch.worst_s * 1000:7.1f} ms over {watch.polls} polls   "
                    f"load average {os.getloadavg()[0]:.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
