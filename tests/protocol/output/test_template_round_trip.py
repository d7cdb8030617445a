"""The real chat templates write an assistant's tool calls the way their model does: what a
template renders for a tool-call turn (the calls as a client sends them back, arguments as
JSON strings), parsed by the format ``auto`` picks for it, gives back the same calls (and
reasoning). The templates are the llama-cpp-python sdist's, pinned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.protocol.output import output_parser, resolve
from app.rendering import ChatTemplate
from app.tools import assets as app_assets
from tests.protocol.output.helpers import counting_ids

TURN_ENDS = ("<|im_end|>", "<｜end▁of▁sentence｜>", "</s>", "<|eot_id|>", "<|eom_id|>")
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": "A tool.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "apply_patch")
]
CALLS = [
    ("read_file", {"path": "app/main.py"}),
    ("apply_patch", {"path": "a.py", "hunks": [{"at": 3, "text": 'print("}<|x|>")'}]}),
]
TEMPLATES = {
    # template stem: (format, calls per turn, reasoning the template writes back). The
    # sdist's Kimi-K2-Instruct and Kimi-K2-Thinking append to a list while rendering a call,
    # which transformers' sandbox refuses (and so the proxy's): they render no call turn.
    "moonshotai-Kimi-K2": ("kimi_k2", 2, False),
    "deepseek-ai-DeepSeek-V3.1": ("deepseek_v31", 2, False),
    "Mistral-Small-3.2-24B-Instruct-2506": ("mistral", 2, False),
    "unsloth-mistral-Devstral-Small-2507": ("mistral", 2, False),
    "mistralai-Ministral-3-14B-Reasoning-2512": ("mistral", 2, False),
    "meta-llama-Llama-3.1-8B-Instruct": ("llama3_json", 1, False),
    "meta-llama-Llama-3.2-3B-Instruct": ("llama3_json", 1, False),
    "meta-llama-Llama-3.3-70B-Instruct": ("llama3_json", 1, False),
}


@pytest.fixture(scope="module")
def templates(assets_dir: Path) -> dict[str, Path]:
    return app_assets.templates(assets_dir)


def assistant_turn(template: ChatTemplate, message: dict[str, Any]) -> str:
    """What the template writes for ``message`` after the generation prompt, up to the end
    of the turn: the text the model generated for it."""
    user = [{"role": "user", "content": "Fix the bug in a.py."}]
    prompt = template.render(user, tools=TOOLS)
    full = template.render([*user, message], tools=TOOLS, add_generation_prompt=False)
    assert full.startswith(prompt)
    turn = full[len(prompt) :].rstrip()
    for end in TURN_ENDS:
        turn = turn.removesuffix(end)
    return turn


@pytest.mark.parametrize("stem", sorted(TEMPLATES))
def test_a_tool_call_turn_the_template_writes_parses_back(
    stem: str, templates: dict[str, Path]
) -> None:
    fmt, count, writes_reasoning = TEMPLATES[stem]
    template = ChatTemplate.from_jinja_file(templates[stem], special_tokens=SPECIAL_TOKENS)
    assert resolve("auto", [template.source(tools=True)])[0] == fmt
    calls = CALLS[:count]
    message = {
        "role": "assistant",
        "content": "",
        "reasoning_content": "The patch goes in a.py.",
        "tool_calls": [
            {"id": f"c{i}rSt9aB0", "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}
            for i, (name, arguments) in enumerate(calls)
        ],
    }  # fmt: skip
    turn = assistant_turn(template, message)
    parser = output_parser(fmt, reasoning=True, tools=TOOLS, id_factory=counting_ids())
    out = parser.parse(turn)
    assert [(call.name, json.loads(call.arguments)) for call in out.tool_calls] == calls, turn
    assert out.content is None, turn
    assert out.reasoning_content == ("The patch goes in a.py." if writes_reasoning else None)
    assert parser.finish_reason("stop") == "tool_calls"
