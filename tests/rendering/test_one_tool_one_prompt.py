"""One conversation, three client APIs, one prompt: the same agent transcript sent as an
OpenAI chat request, an Anthropic Messages request and a Responses request goes through each
API's real translation (``anthropic_request``, ``responses_request``) and the chat request
check (``openai_chat``), then renders to the same text, so the same ids, with every real
template (llama.cpp's collection, docs/assets.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.errors import TemplateError
from app.main import load_template
from app.protocol.anthropic_request import to_chat_body
from app.protocol.openai_chat import ChatRequest, parse_chat_request
from app.protocol.responses_request import chat_body
from tests.rendering.test_real_templates import TOKENIZER_OF

SYSTEM = "You are a coding agent. Be brief."
READ = {
    "name": "read_file",
    "description": "Read a file of the workspace.",
    "schema": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Relative path."},
            "lines": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["path"],
    },
}
RUN = {
    "name": "run",
    "description": "Run a shell command.",
    "schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
# (reasoning, call id, tool, arguments, result) per tool turn; then the answer and a question.
TURNS = [
    ("I should read setup.py first.", "call00001", "read_file",
     {"path": "setup.py", "lines": [1, 20]}, "version='1.2.3'"),
    ("The tag may differ.", "call00002", "run", {"command": "git describe"}, "v1.2.3-4-gabc"),
]  # fmt: skip
QUESTION = "What does setup.py say about the version?"
ANSWER_REASONING, ANSWER = "Both agree.", "The version is 1.2.3."
FOLLOW_UP = "Thanks. And the name?"


def openai_chat() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
    ]
    for reasoning, call_id, name, arguments, result in TURNS:
        call = {"id": call_id, "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
        messages += [
            {"role": "assistant", "content": None, "reasoning_content": reasoning,
             "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ]  # fmt: skip
    messages += [
        {"role": "assistant", "content": ANSWER, "reasoning_content": ANSWER_REASONING},
        {"role": "user", "content": FOLLOW_UP},
    ]
    tools = [
        {"type": "function", "function": {"name": t["name"], "description": t["description"],
                                          "parameters": t["schema"]}}
        for t in (READ, RUN)
    ]  # fmt: skip
    return {"model": "m", "messages": messages, "tools": tools, "max_tokens": 64}


def anthropic_messages() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    for reasoning, call_id, name, arguments, result in TURNS:
        messages += [
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": reasoning, "signature": "sig"},
                {"type": "tool_use", "id": call_id, "name": name, "input": arguments}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": result}]},
        ]  # fmt: skip
    messages += [
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": ANSWER_REASONING, "signature": "sig"},
            {"type": "text", "text": ANSWER}]},
        {"role": "user", "content": [{"type": "text", "text": FOLLOW_UP}]},
    ]  # fmt: skip
    tools = [
        {"name": t["name"], "description": t["description"], "input_schema": t["schema"]}
        for t in (READ, RUN)
    ]
    return {"model": "m", "system": SYSTEM, "messages": messages, "tools": tools,
            "max_tokens": 64}  # fmt: skip


def responses() -> dict[str, Any]:
    def summary(text: str) -> dict[str, Any]:
        return {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}

    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]}
    ]
    for reasoning, call_id, name, arguments, result in TURNS:
        items += [
            summary(reasoning),
            {"type": "function_call", "call_id": call_id, "name": name,
             "arguments": json.dumps(arguments)},
            {"type": "function_call_output", "call_id": call_id, "output": result},
        ]  # fmt: skip
    items += [
        summary(ANSWER_REASONING),
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": ANSWER}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": FOLLOW_UP}]},
    ]  # fmt: skip
    tools = [
        {"type": "function", "name": t["name"], "description": t["description"],
         "parameters": t["schema"]}
        for t in (READ, RUN)
    ]  # fmt: skip
    return {"model": "m", "instructions": SYSTEM, "input": items, "tools": tools}


def _requests() -> dict[str, ChatRequest]:
    return {
        "chat": parse_chat_request(openai_chat()),
        "anthropic": parse_chat_request(to_chat_body(anthropic_messages()).body),
        "responses": parse_chat_request(chat_body(responses())),
    }


def _key_orders(value: Any) -> Any:
    if isinstance(value, dict):
        return [(key, _key_orders(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [_key_orders(item) for item in value]
    return value


def test_the_translations_give_the_chat_request_s_tools_key_for_key() -> None:
    requests = _requests()
    want = _key_orders(requests["chat"].tools)
    assert _key_orders(requests["anthropic"].tools) == want
    assert _key_orders(requests["responses"].tools) == want


@pytest.mark.parametrize("stem", sorted(TOKENIZER_OF))
def test_one_conversation_renders_one_prompt(stem: str, model_files: dict[str, Path]) -> None:
    template = load_template(model_files[f"template:{stem}"], model_files.get(TOKENIZER_OF[stem]))
    rendered: dict[str, str | tuple[str]] = {}
    for api, request in _requests().items():
        try:
            rendered[api] = template.render(request.messages, tools=request.tools)
        except TemplateError as exc:  # Kimi K2's llama.cpp templates: the same refusal
            rendered[api] = (str(exc),)
    assert rendered["anthropic"] == rendered["chat"]
    assert rendered["responses"] == rendered["chat"]
