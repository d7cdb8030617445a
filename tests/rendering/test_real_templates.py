"""The real chat templates of the models agents run, loaded as a user gives them (a ``.jinja``
file next to a tokenizer folder), render what transformers renders with that tokenizer.

Reference: transformers' ``PreTrainedTokenizerFast`` built from the tokenizer.json and its
tokenizer_config.json, ``apply_chat_template(..., tokenize=False)`` with the template file as
``chat_template`` and the messages as vLLM hands them over (arguments as objects), then HF
encode. Ours: ``load_template`` (what ``toksplice serve --chat-template`` runs) rendering the
OpenAI request's messages, then the same encode. Where the model's own tokenizer is not offline,
a tokenizer of the same family stands in (docs/assets.md, "Models").
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import pytest
from tokenizers import Tokenizer

from app.errors import TemplateError
from app.main import load_template
from app.tools import assets as app_assets
from app.tools import model_pins

# template stem -> the tokenizer folder it is rendered with (its own, else one of its family).
TOKENIZER_OF = {
    "Qwen3-Coder": "qwen3",
    "Qwen-Qwen3-0.6B": "qwen3",
    "Qwen3.5-4B": "qwen35",
    "GLM-4.6": "llama3_1",
    "GLM-4.7-Flash": "llama3_1",
    "Kimi-K2-Instruct": "gpt_oss",
    "Kimi-K2-Thinking": "gpt_oss",
    "moonshotai-Kimi-K2": "gpt_oss",
    "Kimi-K3": "gpt_oss",
    "deepseek-ai-DeepSeek-V3.1": "deepseek_v4",
    "deepseek-ai-DeepSeek-V3.2": "deepseek_v4",
    "deepseek-ai-DeepSeek-V4": "deepseek_v4",
    "deepseek-ai-DeepSeek-V4-Flash-0731": "deepseek_v4",
    "openai-gpt-oss-120b": "gpt_oss",
    "MiniMax-M2": "gpt_oss",
    "MiniMax-M3": "gpt_oss",
    "Mistral-Small-3.2-24B-Instruct-2506": "tekken",
    "unsloth-mistral-Devstral-Small-2507": "tekken",
    "mistralai-Ministral-3-14B-Reasoning-2512": "tekken",
    "google-gemma-4-31B-it": "gemma3",
    "google-gemma-4-31B-it-interleaved": "gemma3",
    "ByteDance-Seed-OSS": "llama3_1",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "llama3_1",
    "meta-llama-Llama-3.1-8B-Instruct": "llama3_1",
    "meta-llama-Llama-3.2-3B-Instruct": "llama3_1",
    "meta-llama-Llama-3.3-70B-Instruct": "llama3_1",
}

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the workspace.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Relative path."},
                    "lines": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}},
                "required": ["command"],
            },
        },
    },
]


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip


# An agent's transcript as an OpenAI chat request sends it: several turns, reasoning, one tool
# call per turn (Llama 3.1's template takes no more) without text beside it (gpt-oss's template
# refuses both), results, and a follow-up question. The call ids are 9 letters and digits, as
# Mistral's templates require.
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a coding agent. Be brief."},
    {"role": "user", "content": "What does setup.py say about the version?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "I should read setup.py first.",
        "tool_calls": [_call("call00001", "read_file", {"path": "setup.py", "lines": [1, 20]})],
    },
    {"role": "tool", "tool_call_id": "call00001", "content": "version='1.2.3'\nname=\"x\""},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "The tag may differ.",
        "tool_calls": [_call("call00002", "run", {"command": "git describe", "timeout": 2.5})],
    },
    {"role": "tool", "tool_call_id": "call00002", "content": "v1.2.3-4-gabc"},
    {
        "role": "assistant",
        "content": "The version is 1.2.3 (4 commits past the tag).",
        "reasoning_content": "Both agree.",
    },
    {"role": "user", "content": "Thanks. And the name?"},
]


def _as_vllm_passes_them(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """vLLM turns each tool call's ``arguments`` JSON string into an object before rendering."""
    out = copy.deepcopy(messages)
    for message in out:
        for call in message.get("tool_calls", ()):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


@pytest.fixture(scope="session")
def model_files(assets_dir: Path) -> dict[str, Path]:
    files = app_assets.fetch(assets_dir) | app_assets.models(assets_dir, without_npm=True)
    return files | {f"template:{k}": v for k, v in app_assets.templates(assets_dir).items()}


@pytest.fixture(scope="session")
def hf_tokenizer(model_files: dict[str, Path]) -> Callable[[str], Any]:
    fast = pytest.importorskip("transformers").PreTrainedTokenizerFast

    @functools.cache
    def load(name: str) -> Any:
        if name not in model_files:
            pytest.skip(f"tokenizer {name} is not in the cache (fetched with npm, not installed)")
        return fast.from_pretrained(str(model_files[name].parent))

    return load


def test_every_pinned_template_is_paired() -> None:
    assert set(TOKENIZER_OF) == set(model_pins.TEMPLATES)


# Templates that print a message's content as it is although they also loop over it as parts:
# given parts (vLLM's "openai" content format), they print the Python repr of the list.
PRINTS_PARTS = {"moonshotai-Kimi-K2", "google-gemma-4-31B-it", "google-gemma-4-31B-it-interleaved"}


@pytest.mark.parametrize(
    "stem",
    [
        pytest.param(stem, marks=pytest.mark.xfail(strict=True, reason="content parts' repr"))
        if stem in PRINTS_PARTS
        else stem
        for stem in sorted(TOKENIZER_OF)
    ],
)
def test_template_file_renders_as_transformers_with_its_tokenizer(
    stem: str, model_files: dict[str, Path], hf_tokenizer: Callable[[str], Any]
) -> None:
    name = TOKENIZER_OF[stem]
    reference = hf_tokenizer(name)
    path = model_files[f"template:{stem}"]
    template = load_template(path, model_files[name])
    try:
        want_text = reference.apply_chat_template(
            _as_vllm_passes_them(MESSAGES),
            tools=TOOLS,
            chat_template=path.read_text(encoding="utf-8"),
            add_generation_prompt=True,
            tokenize=False,
        )
    except jinja2.TemplateError:  # transformers' sandbox refuses it (llama.cpp's engine does not)
        with pytest.raises(TemplateError):
            template.render(MESSAGES, tools=TOOLS)
        return
    got_text = template.render(MESSAGES, tools=TOOLS)
    assert got_text == want_text
    encoder = Tokenizer.from_file(str(model_files[name]))
    got = encoder.encode(got_text, add_special_tokens=False).ids
    assert got == reference.encode(want_text, add_special_tokens=False)
