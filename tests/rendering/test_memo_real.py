"""The render memo is exact on every pinned real template (those whose loops call macros:
Qwen3-Coder, Qwen3.5, GLM-4.7, gpt-oss, MiniMax M2, Gemma 4, among them): a memoized render
equals a fresh one over generated agent sessions (tools, tool calls and results, reasoning,
several turns, edits, option changes)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.rendering import ChatTemplate, RenderCache, replay
from app.sessions.registry import SessionRegistry
from app.tools import assets, model_pins
from tests.rendering.strategies import TOOLS, conversation
from tests.rendering.test_memo import agent_call, check_session, edit, outcome, session_memo

MACRO_TEMPLATES = [
    "Qwen3-Coder",
    "Qwen3.5-4B",
    "GLM-4.7-Flash",
    "openai-gpt-oss-120b",
    "MiniMax-M2",
    "google-gemma-4-31B-it",
]


@functools.cache
def real(stem: str) -> ChatTemplate:
    path = assets.templates(assets.default_dir()).get(stem)
    if path is None or not Path(path).exists():
        pytest.skip(f"template {stem} is not in the asset cache")
    return ChatTemplate.from_jinja_file(
        path, special_tokens={"bos_token": "<s>", "eos_token": "</s>"}
    )


@pytest.mark.parametrize("stem", sorted(model_pins.TEMPLATES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conv=conversation(),
    edits=st.lists(edit, min_size=1, max_size=6),
    tail_min=st.sampled_from([0, 2, 32]),
)
def test_memo_equals_fresh_render_on_real_templates(
    stem: str, conv: Any, edits: list[Any], tail_min: int
) -> None:
    with mock.patch.object(replay, "_TAIL_MIN", tail_min):
        check_session(list(conv[0]), edits, [real(stem)])


@pytest.mark.parametrize("stem", MACRO_TEMPLATES)
def test_an_agent_session_replays_on_real_templates(stem: str) -> None:
    """A growing agent session: every call equals a fresh render, and a call after a tool
    result replays all but a few iterations of the main loop."""
    template = real(stem)
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
    ]
    for i in range(12):
        answer, follow = agent_call(i, user_turn=i % 5 == 4)
        messages = [*messages, {**answer, "content": ""}, follow]  # gpt-oss: not both
        got = template.render(messages, tools=TOOLS, cache=cache, session="x")
        assert got == template.render(messages, tools=TOOLS)
    main = max(session_memo(cache, template, "x").runs.values(), key=lambda run: len(run.items))
    assert main.replayed >= len(main.items) - 4


@pytest.mark.parametrize("stem", MACRO_TEMPLATES)
@pytest.mark.parametrize("edited", [3, 4])
def test_a_neighbour_edited_rerenders_the_tool_result(stem: str, edited: int) -> None:
    """Qwen3-Coder's and Qwen3.5's tool results read ``loop.previtem`` and ``loop.nextitem``
    (they open and close one user turn around consecutive results): replacing the result
    before or after an unchanged one changes how that one renders."""
    template = real(stem)
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    answer, _ = agent_call(0, user_turn=False)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {**answer, "content": ""},
        {"role": "tool", "tool_call_id": "c0", "content": "first"},
        {"role": "tool", "tool_call_id": "c0", "content": "second"},
        {"role": "user", "content": "v"},
    ]
    for version in (
        messages,
        [*messages[:edited], {"role": "user", "content": "w"}, *messages[edited + 1 :]],
    ):
        memo = outcome(template, version, tools=TOOLS, cache=cache, session="x")
        assert memo == outcome(template, version, tools=TOOLS)
