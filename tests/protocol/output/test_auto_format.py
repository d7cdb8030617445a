"""``--tool-format auto`` against the real chat templates (the llama-cpp-python sdist's, pinned
in ``app.tools.model_pins``): each picks the format its model writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.generation import ToolFormat
from app.protocol.output import FORMATS, detect, output_parser, resolve
from app.rendering import ChatTemplate
from app.tools import assets as app_assets
from app.tools import model_pins

EXPECTED: dict[str, ToolFormat] = {
    "Qwen-Qwen3-0.6B": "hermes",
    "Qwen3-Coder": "qwen3_coder",
    "Qwen3.5-4B": "qwen3_coder",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "qwen3_coder",
    "GLM-4.6": "glm45",
    "GLM-4.7-Flash": "glm47",
    "Kimi-K2-Instruct": "kimi_k2",
    "Kimi-K2-Thinking": "kimi_k2",
    "moonshotai-Kimi-K2": "kimi_k2",
    "deepseek-ai-DeepSeek-V3.1": "deepseek_v31",
    "deepseek-ai-DeepSeek-V3.2": "deepseek_v32",
    "deepseek-ai-DeepSeek-V4": "deepseek_v32",
    "deepseek-ai-DeepSeek-V4-Flash-0731": "deepseek_v32",
    "MiniMax-M2": "minimax_m2",
    "Mistral-Small-3.2-24B-Instruct-2506": "mistral",
    "unsloth-mistral-Devstral-Small-2507": "mistral",
    "mistralai-Ministral-3-14B-Reasoning-2512": "mistral",
    "meta-llama-Llama-3.1-8B-Instruct": "llama3_json",
    "meta-llama-Llama-3.2-3B-Instruct": "llama3_json",
    "meta-llama-Llama-3.3-70B-Instruct": "llama3_json",
    "google-gemma-4-31B-it": "gemma4",
    "google-gemma-4-31B-it-interleaved": "gemma4",
    "ByteDance-Seed-OSS": "seed_oss",
    "openai-gpt-oss-120b": "harmony",
}
UNPARSED = {"Kimi-K3", "MiniMax-M3"}
"""Templates of formats the proxy does not read (``auto`` keeps the default, ``hermes``)."""


@pytest.fixture(scope="module")
def templates(assets_dir: Path) -> dict[str, Path]:
    return app_assets.templates(assets_dir)


def auto(path: Path) -> tuple[ToolFormat | None, str]:
    """What the service picks at start-up for this template (``app.main``'s reading)."""
    template = ChatTemplate.from_jinja_file(path)
    return resolve("auto", dict.fromkeys((template.source(), template.source(tools=True))))


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_auto_picks_the_format_the_model_writes(stem: str, templates: dict[str, Path]) -> None:
    assert auto(templates[stem]) == (EXPECTED[stem], "auto: from the chat template's markers")


def test_every_pinned_template_is_expected() -> None:
    """A template added to the pins needs its expected format here."""
    assert set(model_pins.TEMPLATES) == set(EXPECTED) | UNPARSED


@pytest.mark.parametrize("stem", sorted(UNPARSED))
def test_formats_the_proxy_does_not_read_keep_the_default(
    stem: str, templates: dict[str, Path]
) -> None:
    assert auto(templates[stem])[0] == "hermes"


def test_every_format_is_found_by_its_own_markers() -> None:
    """Each format's markers pick it (a format that extends another lists more markers)."""
    for name, fmt in FORMATS.items():
        assert detect(["".join(fmt.template_markers)]) == name


def test_a_template_without_markers_keeps_the_default_and_an_explicit_value_wins() -> None:
    plain = "{% for m in messages %}{{ m.content }}{% endfor %}"
    assert resolve("auto", [plain]) == (
        "hermes",
        "auto: no known format's markers in the chat template, the default",
    )
    assert resolve("glm47", [plain]) == ("glm47", "--tool-format")
    assert resolve(None, ["<tool_call>"]) == (None, "--tool-format")


def test_the_format_decides_the_reasoning_markers() -> None:
    """Seed-OSS reasoning is ``<seed:think>``: ``<think>`` there is content."""
    seed = output_parser("seed_oss", reasoning=True, tools=None)
    assert seed.parse("<think>a</think>b").content == "<think>a</think>b"
    seed = output_parser("seed_oss", reasoning=True, tools=None)
    assert seed.parse("<seed:think>a</seed:think>b").reasoning_content == "a"
