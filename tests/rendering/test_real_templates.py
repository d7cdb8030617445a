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


# The same transcript with its contents given as lists of text parts (as the Anthropic and
# Responses translations and many clients send them).
MESSAGES_AS_PARTS: list[dict[str, Any]] = [
    {**m, "content": [{"type": "text", "text": m["content"]}]}
    if m["role"] in ("system", "tool")
    else {
        **m,
        "content": [
            {"type": "text", "text": "Look at it:"},
            {"type": "text", "text": m["content"]},
        ],
    }
    if m["role"] == "user"
    else m
    for m in MESSAGES
]
CONVERSATIONS = {"strings": MESSAGES, "parts": MESSAGES_AS_PARTS}

# vLLM's content format per template (its detection run on each file).
OPENAI_FORMAT = {
    "GLM-4.6", "GLM-4.7-Flash", "MiniMax-M2", "MiniMax-M3", "Mistral-Small-3.2-24B-Instruct-2506",
    "Qwen3.5-4B", "google-gemma-4-31B-it", "google-gemma-4-31B-it-interleaved",
    "mistralai-Ministral-3-14B-Reasoning-2512", "moonshotai-Kimi-K2",
    "unsloth-mistral-Devstral-Small-2507",
}  # fmt: skip
# Templates that also print a content they loop over as it is: given vLLM's plain lists, they
# print the list's Python repr (Kimi K2's assistant turns, Gemma 4's system prompt).
PRINTS_PARTS = {"moonshotai-Kimi-K2", "google-gemma-4-31B-it", "google-gemma-4-31B-it-interleaved"}
REPR = "{'type': 'text'"


def _as_vllm_passes_them(messages: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """What vLLM hands transformers: each content as a list of text parts ("openai") or their
    texts joined with newlines ("string"), each tool call's ``arguments`` as an object."""
    out = copy.deepcopy(messages)
    for message in out:
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        message["content"] = parts if fmt == "openai" else "\n".join(p["text"] for p in parts)
        if message["role"] == "tool":  # vLLM joins a tool result's text parts in both formats
            message["content"] = "\n".join(p["text"] for p in parts)
        for call in message.get("tool_calls", ()):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


@pytest.fixture(scope="session")
def hf_tokenizer(model_files: dict[str, Path]) -> Callable[[str], Any]:
    fast = pytest.importorskip("transformers").PreTrainedTokenizerFast

    @functools.cache
    def load(name: str) -> Any:
        if name not in model_files:
            pytest.skip(f"tokenizer {name} is not in the cache (fetched with npm, not installed)")
        return fast.from_pretrained(str(model_files[name].parent))

    return load


@functools.cache
def _encoder(path: Path) -> Tokenizer:
    return Tokenizer.from_file(str(path))


def test_every_pinned_template_is_paired() -> None:
    assert set(TOKENIZER_OF) == set(model_pins.TEMPLATES)


def test_every_content_format_is_vllms(model_files: dict[str, Path]) -> None:
    for stem in TOKENIZER_OF:
        template = load_template(model_files[f"template:{stem}"])
        assert template.content_format() == ("openai" if stem in OPENAI_FORMAT else "string")


@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
@pytest.mark.parametrize("stem", sorted(TOKENIZER_OF))
def test_template_file_renders_as_transformers_with_its_tokenizer(
    stem: str, conversation: str, model_files: dict[str, Path], hf_tokenizer: Callable[[str], Any]
) -> None:
    """Equal to transformers given what vLLM gives it, except that no list of parts is ever
    printed as its Python repr: where vLLM's is, ours prints the parts' texts joined."""
    name = TOKENIZER_OF[stem]
    reference = hf_tokenizer(name)
    path = model_files[f"template:{stem}"]
    messages = CONVERSATIONS[conversation]
    template = load_template(path, model_files[name])

    given = _as_vllm_passes_them(messages, template.content_format())

    def transformers_render() -> str:
        text = reference.apply_chat_template(
            given,
            tools=TOOLS,
            chat_template=path.read_text(encoding="utf-8"),
            add_generation_prompt=True,
            tokenize=False,
        )
        assert isinstance(text, str)
        return text

    try:
        want_text = transformers_render()
    except jinja2.TemplateError:  # transformers' sandbox refuses it (llama.cpp's engine does not)
        with pytest.raises(TemplateError):
            template.render(messages, tools=TOOLS)
        return
    if REPR in want_text:
        assert stem in PRINTS_PARTS
        for message in given:
            if isinstance(parts := message["content"], list):
                want_text = want_text.replace(str(parts), "\n".join(p["text"] for p in parts))
    got_text = template.render(messages, tools=TOOLS)
    assert REPR not in got_text
    assert got_text == want_text
    got = _encoder(model_files[name]).encode(got_text, add_special_tokens=False).ids
    assert got == reference.encode(want_text, add_special_tokens=False)
