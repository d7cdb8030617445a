"""Where a template's special tokens come from: the tokenizer_config.json beside the tokenizer,
read as transformers builds its ``special_tokens_map``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from app.errors import TemplateError
from app.rendering import ChatTemplate
from app.rendering.loading import from_path, special_tokens_beside

TEMPLATE = "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}"
USER = [{"role": "user", "content": "hi"}]


def _folder(tmp_path: Path, config: dict[str, object] | None) -> Path:
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    if config is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (tmp_path / "t.jinja").write_text(TEMPLATE, encoding="utf-8")
    return tmp_path


def test_every_named_token_of_the_config(tmp_path: Path) -> None:
    config = {
        "bos_token": {"__type": "AddedToken", "content": "<s>", "special": True},
        "eos_token": "</s>",
        "pad_token": None,
        "add_bos_token": True,
        "boi_token": "<img>",
        "extra_special_tokens": {"image_token": "<image>"},
    }
    _folder(tmp_path, config)
    assert special_tokens_beside(tmp_path / "tokenizer.json") == {
        "bos_token": "<s>", "eos_token": "</s>", "boi_token": "<img>", "image_token": "<image>",
    }  # fmt: skip


def test_a_template_file_renders_with_the_tokens_beside_the_tokenizer(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"bos_token": "<s>", "eos_token": "</s>"})
    template = ChatTemplate.load(folder / "t.jinja", tokenizer_file=folder / "tokenizer.json")
    assert template.render(USER, add_generation_prompt=False) == "<s>hi</s>"


def test_a_bare_tokenizer_json_leaves_them_undefined_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _folder(tmp_path, None)
    with caplog.at_level(logging.WARNING, logger="toksplice"):
        template = ChatTemplate.load(folder / "t.jinja", tokenizer_file=folder / "tokenizer.json")
    assert template.render(USER, add_generation_prompt=False) == "hi"
    assert "no tokenizer_config.json beside the tokenizer" in caplog.text


def test_a_folder_and_its_chat_template_jinja(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"bos_token": "<s>", "eos_token": "</s>"})
    (folder / "chat_template.jinja").write_text(TEMPLATE, encoding="utf-8")
    source = from_path(folder)
    assert source.templates == {"default": TEMPLATE}
    assert source.special_tokens == {"bos_token": "<s>", "eos_token": "</s>"}


def test_missing_template(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="no chat template at"):
        from_path(tmp_path / "nothing.jinja")
