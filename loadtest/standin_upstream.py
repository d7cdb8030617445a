"""A stand-in model server for benchmarks: speaks llama.cpp's HTTP API and answers at once.

    python loadtest/standin_upstream.py --tokenizer .assets/qwen3 --port 8090

Long transcripts (100K to 4M characters) do not fit a small local model, so benchmarks put this
behind the proxy: whatever it adds is the proxy's own cost.  It serves:

* ``POST /v1/completions`` with ``prompt: [ids]``: a three-chunk answer at once (stream or not);
  with ``--echo-digest`` the answer is ``ids:`` + ``prompt_digest(prompt)`` instead, so a load
  generator can check every prompt against the reference without this server storing any;
  ``make_app(respond=...)`` scripts the answer instead (from the decoded prompt: what an agent
  test needs the model to say, tool calls and thinking in the model's own format), and
  ``prompts`` collects every prompt received, for the test to check against the reference;
  the tokenizer's special tokens are left out of a scripted answer unless the request keeps
  them (``skip_special_tokens: false`` as vLLM and SGLang take it, or llama.cpp's
  ``preserved_tokens``), as those servers do;
* ``POST /v1/chat/completions``: what a server does when a client sends the chat request
  straight to it: render the chat template and tokenize the whole text (Hugging Face
  ``tokenizers``, as vLLM does), then the same instant answer.  This is the "direct" path;
* ``POST /tokenize`` (llama.cpp's ``content`` or vLLM's ``prompt``), ``GET /health``.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import struct
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.rendering import ChatTemplate

_ANSWER = ("Done", ".", "")
_CONTEXT = 131072
"""The context it says it has, where a server says (vLLM's ``/tokenize``)."""


def prompt_digest(ids: list[int]) -> str:
    """blake2b-128 of the ids as little-endian int32."""
    return hashlib.blake2b(struct.pack(f"<{len(ids)}i", *ids), digest_size=16).hexdigest()


def expected_answer(template: ChatTemplate, tokenizer: Tokenizer, body: dict[str, Any]) -> str:
    """What ``--echo-digest`` answers to the proxy's request for the chat ``body`` when the
    proxy sent the reference encode of the rendered request."""
    rendered = template.render(body["messages"], tools=body.get("tools"))
    return "ids:" + prompt_digest(tokenizer.encode(rendered, add_special_tokens=False).ids)


def make_app(
    folder: Path,
    *,
    echo_digest: bool = False,
    respond: Callable[[str], str] | None = None,
    prompts: list[list[int]] | None = None,
    template: Path | None = None,
) -> Starlette:
    """``respond(prompt text) -> answer text`` scripts the completions (streamed in pieces of
    a few characters); ``prompts`` receives every completion prompt's ids; ``template``: a
    chat template file for the direct path (else the folder's tokenizer_config.json)."""
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    template_ = ChatTemplate.load(
        template or folder / "tokenizer_config.json", tokenizer_file=folder / "tokenizer.json"
    )
    special = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}

    async def completions(request: Request) -> Response:
        body = orjson.loads(await request.body())
        prompt = body["prompt"]
        if prompts is not None:
            prompts.append(prompt)
        if respond is not None:
            text = _shown(
                respond(tokenizer.decode(prompt, skip_special_tokens=False)), special, body
            )
            answer = (*(text[k : k + 16] for k in range(0, len(text), 16)), "")
        else:
            answer = ("ids:", prompt_digest(prompt), "") if echo_digest else _ANSWER
        return _answer(body, len(prompt), answer)

    async def chat(request: Request) -> Response:
        body = orjson.loads(await request.body())
        text = template_.render(body["messages"], tools=body.get("tools"))
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        return _answer(body, len(ids), _ANSWER)

    async def tokenize(request: Request) -> Response:
        body = orjson.loads(await request.body())
        text = body["content"] if "content" in body else body["prompt"]
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        return _json({"tokens": ids, "count": len(ids), "max_model_len": _CONTEXT})

    async def health(request: Request) -> Response:
        return _json({"status": "ok"})

    return Starlette(
        routes=[
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/tokenize", tokenize, methods=["POST"]),
            Route("/health", health),
        ]
    )


def _shown(text: str, special: set[str], body: dict[str, Any]) -> str:
    """``text`` as a server returns it for the request ``body``: without the special tokens
    it was not asked to keep."""
    if body.get("skip_special_tokens") is False:
        return text
    dropped = special - set(body.get("preserved_tokens") or ())
    return re.sub("|".join(map(re.escape, dropped)), "", text) if dropped else text


def _answer(body: dict[str, Any], prompt_tokens: int, answer: tuple[str, ...]) -> Response:
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    if not body.get("stream"):
        return _json(
            {
                "choices": [{"index": 0, "text": "".join(answer), "finish_reason": "stop"}],
                "usage": usage,
            }
        )

    async def events() -> AsyncIterator[bytes]:
        for k, piece in enumerate(answer):
            last = k == len(answer) - 1
            chunk: dict[str, Any] = {
                "choices": [{"index": 0, "text": piece, "finish_reason": "stop" if last else None}]
            }
            if last:
                chunk["usage"] = usage
            yield b"data: " + orjson.dumps(chunk) + b"\n\n"
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def _json(payload: Any) -> Response:
    return Response(orjson.dumps(payload), media_type="application/json")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        required=True,
        help="folder with tokenizer.json and tokenizer_config.json",
    )
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument(
        "--chat-template", type=Path, help="a .jinja for the direct path (else the folder's)"
    )
    parser.add_argument(
        "--echo-digest", action="store_true", help="answer with the digest of the prompt ids"
    )
    args = parser.parse_args()
    uvicorn.run(
        make_app(args.tokenizer, echo_digest=args.echo_digest, template=args.chat_template),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
