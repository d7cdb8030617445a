"""Proxy-added cost per model: the first call and the continuations of 100K-character agent
sessions, on each tested model's real chat template and tokenizer, beside Qwen3.

    .venv/bin/python loadtest/bench_models.py [--chars 100000] [--sessions 8] [--calls 4]
                                              [--models glm-4.7,gpt-oss,...] [--rev REV]

For each model of ``MODELS`` (its chat template from llama-cpp-python's sdist and its own
tokenizer, or one of its family where that is not offline, as the rendering tests pair them;
docs/assets.md), the stand-in upstream (``standin_upstream.py``) and ``toksplice serve
--dialect vllm-completions`` (``--tool-format auto``) start in their own processes; a Qwen3 pair
(its tokenizer_config.json's template) stays up for the whole run.  A session
(``loadtest/agent_sessions.chat_requests``: streamed, with tools, tool calls, their results and
reasoning, its tool-call turns fitted to what the template accepts: ``Shape``) is sent first
at just under ``--chars`` characters, a session the proxy has not seen (its first call), then
``--calls`` continuations.  Sessions alternate between the model and Qwen3 (same seeds, the
order swapped every session), so that the ratio compares the two under the same load.  The
special-token lookalikes in the generated tool outputs are defused, as replay.py's ``plain``.

Printed per model: the proxy-added p50 (``Server-Timing: proxy``, request in -> upstream
request out) of first calls and of continuations, with their render and tokenize p50s, the
routes the tokenization took, and the ratio to Qwen3's p50 measured beside it.

``--rev`` runs every server from a temporary checkout of that revision (``HEAD``: the last
commit), so that a shared working tree changing during the run changes nothing measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.tools import assets  # noqa: E402
from loadtest.agent_sessions import Shape, session_id  # noqa: E402
from loadtest.processes import (  # noqa: E402
    checkout,
    free_port,
    process,
    serve_args,
    standin_args,
)
from loadtest.replay import MODEL, Samples, _call, _p, _timed_bodies  # noqa: E402

REFERENCE = "qwen3"


class Model(NamedTuple):
    template: str | None
    """Stem of the template in llama-cpp-python's collection; None: the tokenizer's own."""
    tokenizer: str
    """Asset name of the tokenizer (docs/assets.md)."""
    shape: Shape = Shape()
    stand_in: bool = False
    """The tokenizer is another of the family: the model's own is not offline."""


MODELS: dict[str, Model] = {
    "qwen3": Model(None, "qwen3"),
    "qwen3-coder": Model("Qwen3-Coder", "qwen3"),
    "qwen3.5": Model("Qwen3.5-4B", "qwen35"),
    "glm-4.7": Model("GLM-4.7-Flash", "llama3_1", stand_in=True),
    "kimi-k2": Model("moonshotai-Kimi-K2", "gpt_oss", stand_in=True),
    "deepseek-v3.1": Model("deepseek-ai-DeepSeek-V3.1", "deepseek_v4"),
    "deepseek-v4": Model("deepseek-ai-DeepSeek-V4", "deepseek_v4"),
    "gpt-oss": Model("openai-gpt-oss-120b", "gpt_oss", Shape(calls_alone=True)),
    "minimax-m2": Model("MiniMax-M2", "gpt_oss", stand_in=True),
    "mistral-small-3.2": Model(
        "Mistral-Small-3.2-24B-Instruct-2506", "tekken", Shape(nine_char_ids=True), True
    ),
    "devstral": Model(
        "unsloth-mistral-Devstral-Small-2507", "tekken", Shape(string_content=True), True
    ),
    "llama-3.1": Model("meta-llama-Llama-3.1-8B-Instruct", "llama3_1", Shape(single_calls=True)),
    "gemma-4": Model("google-gemma-4-31B-it", "gemma3", stand_in=True),
    "seed-oss": Model("ByteDance-Seed-OSS", "llama3_1", stand_in=True),
}


@dataclass
class Measured:
    first: Samples = field(default_factory=Samples)
    continuation: Samples = field(default_factory=Samples)
    format: str = "?"


def _files(model: Model) -> tuple[Path, Path | None]:
    """(the tokenizer's folder, the template file or None)."""
    found = assets.fetch() | assets.models(without_npm=True)
    template = assets.templates()[model.template] if model.template else None
    return found[model.tokenizer].parent, template


@contextlib.contextmanager
def _serving(model: Model, tree: Path) -> Iterator[str]:
    """The stand-in upstream and the proxy for ``model``, run from ``tree``; yields the
    proxy's URL."""
    folder, template = _files(model)
    up, port = free_port(), free_port()
    upstream, proxy = f"http://127.0.0.1:{up}", f"http://127.0.0.1:{port}"
    chat_template = ("--chat-template", str(template)) if template else ()
    with (
        process(standin_args(folder, up, *chat_template), upstream + "/health", root=tree),
        process(
            serve_args(upstream, folder, MODEL, port, "--dialect", "vllm-completions",
                       *chat_template),
            proxy + "/health",
            root=tree,
        ),
    ):  # fmt: skip
        yield proxy


async def _session(proxy: str, bodies: list[bytes], seed: int, into: Measured) -> None:
    """The first call of a new session, then its continuations."""
    headers = {"content-type": "application/json", "x-session-id": f"{session_id(seed)}"}
    url = proxy + "/v1/chat/completions"
    async with httpx.AsyncClient(timeout=600) as client:
        await _call(client, url, bodies[0], headers, into.first)
        for body in bodies[1:]:
            await _call(client, url, body, headers, into.continuation)


def run(
    names: list[str], chars: int, sessions: int, calls: int, tree: Path
) -> dict[str, dict[str, Any]]:
    """Each model in turn beside Qwen3; a model whose proxy fails is reported and skipped."""
    rows: dict[str, dict[str, Any]] = {}
    with _serving(MODELS[REFERENCE], tree) as reference:
        for index, name in enumerate(names):
            seeds = [100_003 * (index + 1) + k for k in range(sessions)]
            try:
                rows[name] = _measure(name, reference, seeds, chars, calls, tree)
            except (RuntimeError, httpx.HTTPError) as error:
                print(f"{name}: failed: {error}", flush=True)
                continue
            print(_format(rows[name]), flush=True)
    return rows


def _measure(
    name: str, reference: str, seeds: list[int], chars: int, calls: int, tree: Path
) -> dict[str, Any]:
    """``name``'s sessions, each followed (or, every other one, preceded) by the same session
    in Qwen3's shape through ``reference``; its row."""
    model = MODELS[name]
    measured, beside = Measured(), Measured()
    with contextlib.ExitStack() as stack:
        proxy = reference if name == REFERENCE else stack.enter_context(_serving(model, tree))
        measured.format = httpx.get(proxy + "/health").json().get("tool_format", "?")
        for k, seed in enumerate(seeds):
            mine = _timed_bodies(seed, chars, calls, False, "chat", model.shape)[0]
            if name == REFERENCE:
                asyncio.run(_session(proxy, mine, seed, measured))
                continue
            theirs = _timed_bodies(seed, chars, calls, False, "chat")[0]
            runs = [(proxy, mine, measured), (reference, theirs, beside)]
            for url, bodies, into in runs[:: -1 if k % 2 else 1]:
                asyncio.run(_session(url, bodies, seed, into))
    return _row(name, model, measured, measured if name == REFERENCE else beside)


def _row(name: str, model: Model, measured: Measured, beside: Measured) -> dict[str, Any]:
    row: dict[str, Any] = {
        "model": name,
        "template": model.template or "tokenizer_config.json",
        "tokenizer": model.tokenizer + (" (family stand-in)" if model.stand_in else ""),
        "tool_format": measured.format,
    }
    for part in ("first", "continuation"):
        ours, ref = getattr(measured, part), getattr(beside, part)
        row[part] = {
            "calls": len(ours.parts.get("proxy", [])),
            "proxy_p50": _p(ours.parts["proxy"], 0.5),
            "render_p50": statistics.median(ours.parts["render"]),
            "tokenize_p50": statistics.median(ours.parts["tokenize"]),
            "qwen3_proxy_p50": _p(ref.parts["proxy"], 0.5),
            "ratio": _p(ours.parts["proxy"], 0.5) / _p(ref.parts["proxy"], 0.5),
            "routes": dict(ours.routes),
        }
    return row


def _format(row: dict[str, Any]) -> str:
    return f"{row['model']:<18} {row['tool_format']:<13} " + " | ".join(
        f"{part} {r['calls']:>2} calls: proxy p50 {r['proxy_p50']:7.2f} ms (render "
        f"{r['render_p50']:6.2f}, tokenize {r['tokenize_p50']:6.2f}) x{r['ratio']:.2f} "
        f"Qwen3 {r['routes']}"
        for part, r in ((p, row[p]) for p in ("first", "continuation"))
    )


def markdown(rows: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| model | tokenizer | format | first call: proxy p50 ms (render / tokenize) "
        "| x Qwen3 (its p50) | continuation: proxy p50 ms (render / tokenize) "
        "| x Qwen3 (its p50) | routes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows.values():
        first, cont = r["first"], r["continuation"]
        lines.append(
            f"| {r['model']} | {r['tokenizer']} | {r['tool_format']} "
            f"| **{first['proxy_p50']:.1f}** ({first['render_p50']:.1f} / "
            f"{first['tokenize_p50']:.1f}) | {first['ratio']:.2f} ({first['qwen3_proxy_p50']:.1f}) "
            f"| **{cont['proxy_p50']:.2f}** ({cont['render_p50']:.2f} / "
            f"{cont['tokenize_p50']:.2f}) | {cont['ratio']:.2f} ({cont['qwen3_proxy_p50']:.2f}) "
            f"| first {_routes(first['routes'])}; then {_routes(cont['routes'])} |"
        )
    return "\n".join(lines)


def _routes(routes: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(routes.items()))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chars", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=8, help="sessions per model")
    parser.add_argument("--calls", type=int, default=4, help="continuations per session")
    parser.add_argument("--models", default=",".join(MODELS), help="names of MODELS")
    parser.add_argument("--rev", help="run the servers from a checkout of this revision")
    args = parser.parse_args()
    names = args.models.split(",")
    if unknown := set(names) - set(MODELS):
        parser.error(f"unknown models: {sorted(unknown)}")
    print(f"load average before: {os.getloadavg()}", flush=True)
    with contextlib.ExitStack() as stack:
        tree = stack.enter_context(checkout(args.rev)) if args.rev else ROOT
        rows = run(names, args.chars, args.sessions, args.calls, tree)
    print(f"load average after: {os.getloadavg()}")
    print(markdown(rows))
    out = ROOT / "loadtest" / "results" / "bench-models.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
