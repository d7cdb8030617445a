"""What the agent tests run: the real CLIs (installed from npm into the asset cache), a scripted
stand-in model server speaking Qwen3's output format, ``toksplice serve`` in front of it, and a
recording front between the CLI and the proxy that keeps every HTTP call the client made.

The reference every prompt is checked against is independent of the proxy's renderer:
transformers' ``apply_chat_template`` with Qwen3's own template, encoded by HF ``tokenizers``.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from tokenizers import Tokenizer

from loadtest.processes import free_port, process, serve_args
from loadtest.standin_upstream import make_app
from tests.api.servers import serving

MODEL = "qwen3"
_HOP = frozenset({"content-length", "transfer-encoding", "connection", "content-encoding",
                  "host", "keep-alive"})


@dataclass
class Call:
    """One HTTP call a client made through the recording front, and the proxy's answer."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    """The request body as sent."""
    status: int = 0
    reply_headers: dict[str, str] = field(default_factory=dict)
    reply: bytes = b""

    @property
    def route(self) -> str:
        return self.reply_headers.get("x-toksplice-route", "")

    @property
    def betas(self) -> list[str]:
        return [b.strip() for b in self.headers.get("anthropic-beta", "").split(",") if b.strip()]


def replay(target: str, calls: list[Call]) -> list[Call]:
    """Send ``calls`` again, in order, byte for byte, straight to ``target``; their answers."""
    again = []
    with httpx.Client(base_url=target, timeout=300) as client:
        for call in calls:
            headers = {k: v for k, v in call.headers.items() if k not in _HOP}
            with client.stream(call.method, call.path, content=call.raw, headers=headers) as r:
                reply = r.read()
            again.append(Call(call.method, call.path, call.headers, call.body, call.raw,
                              r.status_code, dict(r.headers), reply))
    return again


class Front:
    """A transparent HTTP front to ``target`` that records every call (``calls``)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def app(self) -> Starlette:
        client = httpx.AsyncClient(base_url=self.target, timeout=300)

        async def relay(request: Request) -> Response:
            raw = await request.body()
            path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            call = Call(request.method, path, dict(request.headers),
                        orjson.loads(raw) if raw else None, raw)
            with self._lock:
                self.calls.append(call)
            headers = [(k, v) for k, v in request.headers.items() if k not in _HOP]
            upstream = await client.send(
                client.build_request(request.method, path, content=raw, headers=headers),
                stream=True)
            call.status = upstream.status_code
            call.reply_headers = dict(upstream.headers)

            async def body() -> Any:
                async for chunk in upstream.aiter_raw():
                    call.reply += chunk
                    yield chunk

            return StreamingResponse(
                body(), status_code=upstream.status_code,
                headers={k: v for k, v in upstream.headers.items() if k not in _HOP},
                background=BackgroundTask(upstream.aclose))

        return Starlette(routes=[Route("/{path:path}", relay,
                                       methods=["GET", "POST", "HEAD", "PUT", "DELETE"])])

    def take(self) -> list[Call]:
        """The calls recorded since the last ``take``."""
        with self._lock:
            calls, self.calls = self.calls, []
        return calls


@dataclass
class Stack:
    """The stand-in upstream, the proxy and the front; ``url`` is what a client is given."""

    url: str
    folder: Path
    """The tokenizer folder the proxy and the stand-in use."""
    front: Front
    prompts: list[list[int]]
    script: list[Callable[[str], str]]
    """The stand-in's responder is the last one here; tests append theirs."""
    transcripts: set[tuple[str, ...]] = field(default_factory=set)
    """The transcript keys seen so far: a later call of one is a continuation."""

    def take(self) -> tuple[list[Call], list[list[int]]]:
        """The client's calls and the prompts the stand-in received since the last ``take``."""
        prompts = self.prompts[:]
        del self.prompts[: len(prompts)]
        return self.front.take(), prompts


@contextmanager
def stack(qwen3_dir: Path, *serve_extra: str) -> Iterator[Stack]:
    """Stand-in (Qwen3 tokenizer) <- ``toksplice serve`` (subprocess) <- recording front."""
    prompts: list[list[int]] = []
    script: list[Callable[[str], str]] = [lambda text: "Hello."]
    with ExitStack() as stack_:
        upstream = stack_.enter_context(serving(make_app(
            qwen3_dir, respond=lambda text: script[-1](text), prompts=prompts)))
        port = free_port()
        proxy = f"http://127.0.0.1:{port}"
        stack_.enter_context(process(
            serve_args(upstream, qwen3_dir, MODEL, port, "--tool-format", "hermes",
                       *serve_extra), proxy + "/health"))
        front = Front(proxy)
        url = stack_.enter_context(serving(front.app()))
        yield Stack(url, qwen3_dir, front, prompts, script)


# --- the reference ---------------------------------------------------------------------


@functools.cache
def _hf(folder: Path) -> tuple[Any, Tokenizer]:
    import transformers

    return (transformers.AutoTokenizer.from_pretrained(str(folder)),
            Tokenizer.from_file(str(folder / "tokenizer.json")))


def reference_ids(folder: Path, chat: Mapping[str, Any]) -> list[int]:
    """The reference encode of a canonical chat body: vLLM's message preparation (text parts
    joined with newlines for a string-content template, tool-call arguments parsed), then
    transformers' ``apply_chat_template``, then ``tokenizers`` without added specials."""
    hf, tokenizer = _hf(folder)
    messages = [_vllm_message(m) for m in chat["messages"]]
    text = hf.apply_chat_template(
        messages, tools=chat.get("tools"), add_generation_prompt=True, tokenize=False,
        **(chat.get("chat_template_kwargs") or {}))
    ids: list[int] = tokenizer.encode(text, add_special_tokens=False).ids
    return ids


def _vllm_message(message: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(message)
    content = message.get("content")
    if isinstance(content, list):
        out["content"] = "\n".join(p["text"] for p in content if p.get("text") is not None)
    elif content is None:
        out["content"] = ""
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            dict(c, function=dict(c["function"], arguments=json.loads(
                c["function"]["arguments"] or "{}"))) for c in calls]
    elif "tool_calls" in out:
        del out["tool_calls"]
    return {k: v for k, v in out.items() if v is not None}


def scripted(rules: list[tuple[str, str]], default: str = "Hello.") -> Callable[[str], str]:
    """A responder: the answer of the first rule whose trigger is in the prompt's last user
    turn (Qwen3 renders tool results as a user turn), else ``default``."""

    def respond(text: str) -> str:
        last = text.rsplit("<|im_start|>user", 1)[-1]
        return next((answer for trigger, answer in rules if trigger in last), default)

    return respond


def tool_call(name: str, arguments: Mapping[str, Any]) -> str:
    """A tool call as Qwen3 writes one."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def check(
    stack_: Stack,
    chat_of: Callable[[Call], Mapping[str, Any]],
    key_of: Callable[[Call], tuple[str, ...]],
    probes: frozenset[tuple[str, str]] = frozenset(),
) -> list[Call]:
    """Everything one CLI run must satisfy; returns its calls.

    Every answer below 400 (``probes``: calls outside the APIs, e.g. a connectivity check,
    left to their own status); every prompt the stand-in received equals the reference encode
    of exactly one model call the client made (as multisets), every ``count_tokens`` answer
    the reference count; every model call after the first of its transcript (``key_of``) is
    repaired (``append`` / ``edit``), never ``full``."""
    calls, prompts = stack_.take()
    assert calls, "the client made no call"
    api = [c for c in calls if (c.method, c.path.split("?")[0]) not in probes]
    failed = [(c.method, c.path, c.status, c.reply[:300]) for c in api if c.status >= 400]
    assert not failed, failed
    model_calls = [c for c in api if c.path.split("?")[0] in ("/v1/messages", "/v1/responses")]
    expected = sorted(reference_ids(stack_.folder, chat_of(c)) for c in model_calls)
    assert sorted(prompts) == expected, "a prompt sent upstream is not the reference encode"
    for c in api:
        if c.path.split("?")[0] == "/v1/messages/count_tokens":
            counted = orjson.loads(c.reply)["input_tokens"]
            assert counted == len(reference_ids(stack_.folder, chat_of(c)))
    for c in model_calls:
        key = key_of(c)
        if key in stack_.transcripts:
            assert c.route in ("append", "edit"), (c.path, key, c.route)
        stack_.transcripts.add(key)
    return calls


def cli_env(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """A clean environment for a CLI run: PATH, a throwaway HOME, and ``extra``."""
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "TERM": "dumb", **extra}


def claude_env(home: Path, url: str, *, model: str = MODEL, context: int = 32768,
               output: int = 4096) -> dict[str, str]:
    """The README's environment for Claude Code, exactly (and a throwaway HOME)."""
    return cli_env(home, {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_AUTH_TOKEN": "any-string",
        "ANTHROPIC_MODEL": model,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "CLAUDE_CODE_MAX_CONTEXT_TOKENS": str(context),
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(output),
    })


def codex_env(home: Path, url: str, *, model: str = MODEL, context: int = 32768) -> dict[str, str]:
    """A throwaway ``CODEX_HOME`` (under ``home``) holding the README's ``config.toml``."""
    codex_home = home / "codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{model}"\nmodel_provider = "toksplice"\nmodel_context_window = {context}\n\n'
        f'[model_providers.toksplice]\nname = "toksplice"\nbase_url = "{url}/v1"\n'
        'wire_api = "responses"\n')
    return cli_env(home, {"CODEX_HOME": str(codex_home)})
