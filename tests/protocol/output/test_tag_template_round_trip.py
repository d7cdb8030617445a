"""The real chat templates of the tag formats write an assistant's tool calls the way their
model does: what a template renders for a tool-call turn, parsed by the format ``auto`` picks
for it (starting in reasoning where the generation prompt opens it, as the service does),
gives back the same calls, typed by the tools' schemas, and the reasoning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.protocol.output import output_parser, reasoning_markers, resolve
from app.rendering import ChatTemplate
from app.tools import assets as app_assets
from tests.protocol.output.helpers import counting_ids
from tests.protocol.output.test_template_round_trip import SPECIAL_TOKENS

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "apply_patch",
            "description": "A tool.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "line": {"type": "integer"},
                    "hunks": {"type": "array"},
                    "dry_run": {"type": "boolean"},
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_files",
            "description": "A tool.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
PATCH = {
    "path": 'a "b".py',
    "line": 3,
    "hunks": [{"at": 3, "text": 'print("}<tool_call|></tool_call>")'}],
    "dry_run": False,
}
THOUGHT = "The patch goes in a.py."
TEMPLATES = {
    # template stem: (format, arguments of the first call, the thinking switch it reads)
    "GLM-4.6": ("glm45", PATCH, "enable_thinking"),
    "GLM-4.7-Flash": ("glm47", PATCH, "enable_thinking"),
    "MiniMax-M2": ("minimax_m2", PATCH, None),
    "ByteDance-Seed-OSS": ("seed_oss", PATCH, None),  # its non-strings in Python's ``str``
    "deepseek-ai-DeepSeek-V3.2": ("deepseek_v32", PATCH, "thinking"),
    "deepseek-ai-DeepSeek-V4": ("deepseek_v32", PATCH, "thinking"),
    "deepseek-ai-DeepSeek-V4-Flash-0731": ("deepseek_v32", PATCH, "thinking"),
    "google-gemma-4-31B-it": ("gemma4", PATCH, "enable_thinking"),
    "google-gemma-4-31B-it-interleaved": ("gemma4", PATCH, "enable_thinking"),
}
TURN_ENDS = ("[e~[", "<seed:eos>", "<｜end▁of▁sentence｜>", "<|tool_response>", "<turn|>")
"""What ends a tool-call turn (the model's end-of-turn token, or Gemma 4's stop)."""


@pytest.fixture(scope="module")
def templates(assets_dir: Path) -> dict[str, Path]:
    return app_assets.templates(assets_dir)


def generated(
    template: ChatTemplate, message: dict[str, Any], switch: str | None
) -> tuple[str, str]:
    """The generation prompt (thinking on) and what the model generated after it for
    ``message``: the template's rendering of the turn, up to the end of the turn."""
    user = [{"role": "user", "content": "Fix the bug in a.py."}]
    options: dict[str, Any] = {"tools": TOOLS}
    if switch is not None:
        options["chat_template_kwargs"] = {switch: True}
    prompt = template.render(user, add_generation_prompt=True, **options)
    full = template.render([*user, message], add_generation_prompt=False, **options)
    assert full.startswith(prompt), (prompt[-60:], full[len(prompt) - 60 :])
    turn = full[len(prompt) :].rstrip()
    for end in TURN_ENDS:
        turn = turn.removesuffix(end).rstrip()
    return prompt, turn


@pytest.mark.parametrize("stem", sorted(TEMPLATES))
def test_a_tool_call_turn_the_template_writes_parses_back(
    stem: str, templates: dict[str, Path]
) -> None:
    fmt, arguments, switch = TEMPLATES[stem]
    template = ChatTemplate.from_jinja_file(templates[stem], special_tokens=SPECIAL_TOKENS)
    assert resolve("auto", [template.source(tools=True)])[0] == fmt
    calls: list[tuple[str, dict[str, Any]]] = [("apply_patch", arguments), ("list_files", {})]
    message = {
        "role": "assistant",
        "content": "",
        "reasoning_content": THOUGHT,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(calls)
        ],
    }  # fmt: skip
    prompt, turn = generated(template, message, switch)
    markers = reasoning_markers(fmt)
    parser = output_parser(
        fmt,
        reasoning=True,
        tools=TOOLS,
        starts_in_reasoning=markers is not None and markers.opened_by(prompt),
        id_factory=counting_ids(),
    )
    out = parser.parse(turn)
    assert [(call.name, json.loads(call.arguments)) for call in out.tool_calls] == calls, turn
    assert out.content is None, turn
    assert (out.reasoning_content or "").strip() == THOUGHT, turn
