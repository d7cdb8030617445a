"""Byte-identical to transformers: ChatTemplate.render vs the real tokenizer's
``apply_chat_template`` on Qwen3's template, over generated agent conversations."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.rendering import ChatTemplate
from app.tools import assets
from tests.rendering.strategies import TOOLS, conversation, render_options

QWEN3 = assets.default_dir() / "qwen3"
SMOLLM2_CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@functools.cache
def hf_tokenizer() -> Any:
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(QWEN3))


@functools.cache
def qwen3() -> ChatTemplate:
    return ChatTemplate.from_tokenizer_config(QWEN3 / "tokenizer_config.json")


def reference(seen: list[dict[str, Any]], options: dict[str, Any],
              template: str | None = None) -> str:
    kwargs = {} if options["enable_thinking"] is None else {
        "enable_thinking": options["enable_thinking"]}
    out = hf_tokenizer().apply_chat_template(
        seen, tools=options["tools"], add_generation_prompt=options["add_generation_prompt"],
        tokenize=False, chat_template=template, **kwargs)
    assert isinstance(out, str)
    return out


def ours(template: ChatTemplate, sent: list[dict[str, Any]], options: dict[str, Any]) -> str:
    kwargs = {} if options["enable_thinking"] is None else {
        "enable_thinking": options["enable_thinking"]}
    return template.render(sent, tools=options["tools"],
                           add_generation_prompt=options["add_generation_prompt"],
                           chat_template_kwargs=kwargs)


@settings(max_examples=300, deadline=None)
@given(conversation(), render_options)
def test_qwen3_matches_transformers(conv: Any, options: dict[str, Any]) -> None:
    sent, seen = conv
    assert ours(qwen3(), sent, options) == reference(seen, options)


@settings(max_examples=100, deadline=None)
@given(conversation(), render_options)
def test_chatml_matches_transformers(conv: Any, options: dict[str, Any]) -> None:
    sent, seen = conv
    template = ChatTemplate(SMOLLM2_CHATML, special_tokens={"eos_token": "<|im_end|>"})
    assert ours(template, sent, options) == reference(seen, options, SMOLLM2_CHATML)


def test_agent_turn_with_dropped_reasoning() -> None:
    sent = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": None, "reasoning_content": "r2", "tool_calls": [
            {"id": "c", "type": "function",
             "function": {"name": "run", "arguments": '{"cmd": "ls \\u00e9 <|im_end|>"}'}}]},
        {"role": "tool", "tool_call_id": "c", "content": "out1"},
        {"role": "tool", "tool_call_id": "c", "content": "out2"},
    ]
    seen = [dict(m) for m in sent]
    seen[4] = {**sent[4], "content": "", "tool_calls": [
        {"id": "c", "type": "function",
         "function": {"name": "run", "arguments": {"cmd": "ls é <|im_end|>"}}}]}
    options = {"tools": TOOLS, "add_generation_prompt": True, "enable_thinking": None}
    got = ours(qwen3(), sent, options)
    assert got == reference(seen, options)
    assert "r1" not in got and "<think>\nr2\n</think>" in got


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["a", "b\n", "<|im_end|>"]), min_size=1, max_size=4))
def test_text_parts_join_with_newline(parts: list[str]) -> None:
    sent = [{"role": "user", "content": [{"type": "text", "text": p} for p in parts]}]
    seen = [{"role": "user", "content": "\n".join(parts)}]
    options = {"tools": None, "add_generation_prompt": True, "enable_thinking": False}
    assert ours(qwen3(), sent, options) == reference(seen, options)
