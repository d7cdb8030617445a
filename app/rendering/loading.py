"""Where chat templates come from: tokenizer_config.json, a .jinja file, or a GGUF file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from app import gguf_file
from app.errors import TemplateError

# The special tokens transformers passes to every template (``special_tokens_map``).
SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)


class TemplateSource(NamedTuple):
    """Template text by name ("default" for a single template) and the special tokens."""

    templates: dict[str, str]
    special_tokens: dict[str, str]


def from_tokenizer_config(config: Mapping[str, Any] | str | Path) -> TemplateSource:
    """Read ``chat_template`` (a string, or a list of ``{name, template}``) and the special
    tokens (strings or AddedToken-like ``{"content": ...}`` dicts) of a tokenizer config."""
    if not isinstance(config, Mapping):
        try:
            config = json.loads(Path(config).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TemplateError(f"cannot read tokenizer config {config}: {exc}") from exc
        if not isinstance(config, Mapping):
            raise TemplateError("a tokenizer config must be a JSON object")
    raw = config.get("chat_template")
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
    tokens: dict[str, str] = {}
    for name in SPECIAL_TOKEN_NAMES:
        value = config.get(name)
        if isinstance(value, Mapping):
            value = value.get("content")
        if isinstance(value, str):
            tokens[name] = value
    return tokens


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
