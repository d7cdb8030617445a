"""Where chat templates come from: tokenizer_config.json, a .jinja file, or a GGUF file, and
the special tokens they are rendered with.

transformers (v5) renders a template with its tokenizer's ``special_tokens_map`` in scope: the
seven standard names below, every other ``*_token`` key of tokenizer_config.json that holds a
token, and the named ``extra_special_tokens``. A tokenizer.json alone names none of them (its
added tokens say "special", never which one is the bos or eos), so a template file rendered
for a bare tokenizer.json gets none, as transformers would give it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jinja2
from jinja2 import meta

from app import gguf_file
from app.errors import TemplateError
from app.rendering.environment import make_environment

log = logging.getLogger("toksplice")


class TemplateSource(NamedTuple):
    """Template text by name ("default" for a single template) and the special tokens."""

    templates: dict[str, str]
    special_tokens: dict[str, str]


def from_tokenizer_config(config: Mapping[str, Any] | str | Path) -> TemplateSource:
    """Read ``chat_template`` (a string, or a list of ``{name, template}``) and the special
    tokens (strings or AddedToken-like ``{"content": ...}`` dicts) of a tokenizer config.

    A config file without ``chat_template`` takes the ``chat_template.jinja`` beside it, where
    transformers saves a model's template since 4.43."""
    raw: Any = None
    if not isinstance(config, Mapping):
        path = Path(config)
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TemplateError(f"cannot read tokenizer config {path}: {exc}") from exc
        if not isinstance(config, Mapping):
            raise TemplateError("a tokenizer config must be a JSON object")
        beside = path.with_name("chat_template.jinja")
        if "chat_template" not in config and beside.is_file():
            raw = from_jinja_file(beside)
    raw = config.get("chat_template", raw)
    if isinstance(raw, str):
        templates = {"default": raw}
    elif isinstance(raw, list):
        templates = {}
        for entry in raw:
            if not (
                isinstance(entry, Mapping)
                and isinstance(entry.get("name"), str)
                and isinstance(entry.get("template"), str)
            ):
                raise TemplateError("chat_template list entries need 'name' and 'template'")
            templates[entry["name"]] = entry["template"]
    else:
        raise TemplateError("the tokenizer config has no chat_template")
    return TemplateSource(templates, _special_tokens(config))


def _special_tokens(config: Mapping[str, Any]) -> dict[str, str]:
    """The config's ``special_tokens_map`` as transformers builds it (see the module doc)."""
    named = {key: value for key, value in config.items() if key.endswith("_token")}
    extra = config.get("extra_special_tokens")
    if isinstance(extra, Mapping):
        named |= extra
    tokens: dict[str, str] = {}
    for name, value in named.items():
        if isinstance(value, Mapping):
            value = value.get("content")
        if isinstance(value, str):
            tokens[name] = value
    return tokens


def special_tokens_beside(tokenizer_file: str | Path) -> dict[str, str] | None:
    """The special tokens of the tokenizer_config.json in ``tokenizer_file``'s folder, or
    ``None`` when there is none."""
    config = Path(tokenizer_file).with_name("tokenizer_config.json")
    if not config.is_file():
        return None
    try:
        parsed = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TemplateError(f"cannot read tokenizer config {config}: {exc}") from exc
    if not isinstance(parsed, Mapping):
        raise TemplateError(f"{config} is not a JSON object")
    return _special_tokens(parsed)


def from_jinja_file(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"cannot read chat template {path}: {exc}") from exc


def from_gguf(path: str | Path) -> TemplateSource:
    """``tokenizer.chat_template`` (and named ``tokenizer.chat_template.<name>``) of a GGUF
    file, with the bos/eos/pad/unk tokens its metadata names."""
    try:
        meta = gguf_file.read_metadata(path)
        config = gguf_file.tokenizer_config_from_gguf(path)
    except (gguf_file.GGUFError, OSError, ValueError) as exc:
        raise TemplateError(f"cannot read GGUF chat template: {exc}") from exc
    templates = {
        key.removeprefix("tokenizer.chat_template."): value
        for key, value in meta.items()
        if key.startswith("tokenizer.chat_template.") and isinstance(value, str)
    }
    if isinstance(config.get("chat_template"), str):
        templates["default"] = config["chat_template"]
    if not templates:
        raise TemplateError(f"{path} has no tokenizer.chat_template")
    return TemplateSource(templates, _special_tokens(config))


def from_path(path: str | Path, tokenizer_file: str | Path | None = None) -> TemplateSource:
    """The template at ``path``: a GGUF model (its own tokens), a ``.jinja``/``.j2`` file, a
    tokenizer_config.json, or a folder holding one.

    A template file renders with the tokens of the tokenizer_config.json beside
    ``tokenizer_file``, as transformers renders a model folder's template; without one its
    ``*_token`` variables are undefined (as for transformers given a bare tokenizer.json),
    and a template that uses any is logged.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "tokenizer_config.json"
    if not path.exists():
        raise TemplateError(f"no chat template at {path}")
    if path.suffix == ".gguf":
        return from_gguf(path)
    if path.suffix not in (".jinja", ".j2"):
        return from_tokenizer_config(path)
    text = from_jinja_file(path)
    tokens = None if tokenizer_file is None else special_tokens_beside(tokenizer_file)
    if tokens is None and (used := _special_tokens_read(text)):
        log.warning(
            "chat template %s reads %s, but no tokenizer_config.json beside the tokenizer "
            "says which tokens they are: they render empty, as transformers renders them for "
            "a bare tokenizer.json; put the model's tokenizer_config.json beside it",
            path,
            ", ".join(used),
        )
    return TemplateSource({"default": text}, tokens or {})


def _special_tokens_read(text: str) -> list[str]:
    """The ``*_token`` variables a template reads without setting them itself."""
    try:
        names = meta.find_undeclared_variables(make_environment().parse(text))
    except jinja2.TemplateSyntaxError:
        return []  # reported when the template is compiled
    return sorted(name for name in names if name.endswith("_token"))
