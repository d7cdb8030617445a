"""What the agent tests run: the real CLIs (installed from npm into the asset cache), a scripted
stand-in model server writing one model's output format (``models``: Qwen3's unless a test
picks another), ``toksplice serve`` in front of it, and a recording front between the CLI and
the proxy that keeps every HTTP call the client made.

The reference every prompt is checked against is independent of the proxy's renderer:
transformers' ``apply_chat_template`` with the model's own template, encoded by HF
``tokenizers``.
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

from app.tools import assets as app_assets
from loadtest.processes import free_port, process, serve_args
from loadtest.standin_upstream import make_app
from tests.agents.models import QWEN3, Model
from tests.api.servers import serving
from tests.rendering.vllm_source import vllm_roles

MODEL = QWEN3.name
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
    template: Path | None
    """The chat template file the proxy is given (None: the tokenizer folder's)."""
    model: Model
    front: Front
    prompts: list[list[int]]
    script: list[Callable[[str], str]]
    """The stand-in's responder is the last one here; tests append theirs."""
    transcripts: set[tuple[str, ...]] = field(default_factory=set)
    """The transcript keys seen so far: a later call of one is a continuation."""
    answers: list[str] = field(default_factory=list)
    """Every answer the stand-in wrote, in order."""

    def take(self) -> tuple[list[Call], list[list[int]]]:
        """The client's calls and the prompts the stand-in received since the last ``take``."""
        prompts = self.prompts[:]
        del self.prompts[: len(prompts)]
        return self.front.take(), prompts

    def answer_by(self, rules: list[tuple[str, str]], default: str = "Hello.") -> None:
        """From now on the stand-in answers by ``rules`` (``scripted`` at this model's user
        turns; the answers as the model writes them)."""
        respond = scripted(rules, self.model.final(default), self.model.user_turn)
        self.script.append(lambda prompt: self.model.reply(prompt, respond(prompt)))

    def reference(self, chat: Mapping[str, Any]) -> list[int]:
        return reference_ids(self.folder, chat, self.template, self.model.content_format)


@contextmanager
def stack(folder: Path, *serve_extra: str, model: Model = QWEN3,
          template: Path | None = None) -> Iterator[Stack]:
    """Stand-in playing ``model`` (tokenizer ``folder``) <- ``toksplice serve`` (subprocess,
    given ``template`` if any) <- recording front."""
    prompts: list[list[int]] = []
    answers: list[str] = []
    script: list[Callable[[str], str]] = [lambda text: model.reply(text, model.final("Hello."))]

    def respond(text: str) -> str:
        answers.append(script[-1](text))
        return answers[-1]

    given = ("--chat-template", str(template)) if template else ()
    with ExitStack() as stack_:
        upstream = stack_.enter_context(serving(make_app(
            folder, respond=respond, prompts=prompts, template=template)))
        port = free_port()
        proxy = f"http://127.0.0.1:{port}"
        stack_.enter_context(process(
            serve_args(upstream, folder, model.name, port, *given, *model.serve, *serve_extra),
            proxy + "/health"))
        front = Front(proxy)
        url = stack_.enter_context(serving(front.app()))
        yield Stack(url, folder, template, model, front, prompts, script, answers=answers)


# --- the reference ---------------------------------------------------------------------


@functools.cache
def _hf(folder: Path) -> tuple[Any, Tokenizer]:
    import transformers

    return (transformers.PreTrainedTokenizerFast.from_pretrained(str(folder)),
            Tokenizer.from_file(str(folder / "tokenizer.json")))


def reference_ids(folder: Path, chat: Mapping[str, Any], template: Path | None = None,
                  content_format: str = "string") -> list[int]:
    """The reference encode of a canonical chat body: vLLM's message preparation (contents as
    the template's ``content_format`` takes them, tool-call arguments parsed, its own role
    step: developer turns for a template that does not name the role), then
    transformers' ``apply_chat_template`` (with ``template``'s text where given), then
    ``tokenizers`` without added specials."""
    hf, tokenizer = _hf(folder)
    source = template.read_text(encoding="utf-8") if template else hf.chat_template
    messages = [_vllm_message(m, content_format) for m in chat["messages"]]
    messages = vllm_roles(app_assets.servers()["vllm_renderer"])(source, messages)
    text = hf.apply_chat_template(
        messages, tools=chat.get("tools"), add_generation_prompt=True, tokenize=False,
        chat_template=source, **(chat.get("chat_template_kwargs") or {}))
    ids: list[int] = tokenizer.encode(text, add_special_tokens=False).ids
    return ids


def _vllm_message(message: Mapping[str, Any], content_format: str) -> dict[str, Any]:
    out = dict(message)
    content = message.get("content")
    parts = ([] if content is None else [{"type": "text", "text": content}]
             if isinstance(content, str) else
             [{"type": "text", "text": p["text"]} for p in content if p.get("text") is not None])
    if content_format == "openai" and message["role"] != "tool":
        out["content"] = parts
    else:  # vLLM joins a tool result's parts in both formats
        out["content"] = "\n".join(p["text"] for p in parts)
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            dict(c, function=dict(c["function"], arguments=json.loads(
                c["function"]["arguments"] or "{}"))) for c in calls]
    elif "tool_calls" in out:
        del out["tool_calls"]
    return {k: v for k, v in out.items() if v is not None}


def scripted(rules: list[tuple[str, str]], default: str = "Hello.",
             user_turn: str = QWEN3.user_turn) -> Callable[[str], str]:
    """A responder: the answer of the first rule whose trigger is in the prompt from its last
    user turn on (``user_turn`` begins one; tool results follow it), else ``default``."""

    def respond(text: str) -> str:
        last = text.rsplit(user_turn, 1)[-1]
        return next((answer for trigger, answer in rules if trigger in last), default)

    return respond


tool_call = QWEN3.call
"""A tool call as Qwen3 writes one."""


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
    expected = sorted(stack_.reference(chat_of(c)) for c in model_calls)
    assert sorted(prompts) == expected, "a prompt sent upstream is not the reference encode"
    for c in api:
        if c.path.split("?")[0] == "/v1/messages/count_tokens":
            counted = orjson.loads(c.reply)["input_tokens"]
            assert counted == len(stack_.reference(chat_of(c)))
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
