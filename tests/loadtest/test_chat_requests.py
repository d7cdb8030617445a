"""Tests for loadtest.agent_sessions.chat_requests: agent sessions as chat request bodies."""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import deque
from collections.abc import Iterator
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from loadtest.agent_sessions import (  # noqa: E402
    Shape,
    chat_requests,
    content_chars,
    session_id,
    tool_definitions,
)

Body = dict[str, Any]

_BILLING = re.compile(
    r"x-anthropic-billing-header: cc_version=[0-9.]+[0-9a-f]+; cch=([0-9a-f]{5});\n"
)
_ROLES = {"system", "user", "assistant", "tool"}


def _bodies(seed: int, target: int, **kw: Any) -> list[Body]:
    return list(chat_requests(seed, target_chars=target, **kw))


@cache
def _last(seed: int, target: int, billing: bool = False) -> Body:
    return deque(chat_requests(seed, target_chars=target, billing_line=billing), maxlen=1)[0]


def _dump(body: Body) -> str:
    return json.dumps(body, ensure_ascii=False)


def test_argument_validation() -> None:
    with pytest.raises(ValueError):
        chat_requests(0, target_chars=0)
    with pytest.raises(ValueError):
        chat_requests(0, target_chars=100, append_chars=0)
    with pytest.raises(ValueError):
        chat_requests(0, target_chars=100, max_calls=0)


@pytest.mark.parametrize("billing", [False, True])
def test_deterministic(billing: bool) -> None:
    a = [_dump(b) for b in chat_requests(4, target_chars=150_000, billing_line=billing)]
    b = [_dump(b) for b in chat_requests(4, target_chars=150_000, billing_line=billing)]
    assert a == b
    c = [_dump(b) for b in chat_requests(5, target_chars=150_000, billing_line=billing)]
    assert a[0] != c[0]
    assert session_id(4) == session_id(4) != session_id(5)


def test_body_fields() -> None:
    bodies = _bodies(1, 30_000, model="qwen3-8b", stream=True)
    tools = tool_definitions()
    for body in bodies:
        assert set(body) == {"model", "messages", "tools", "stream", "max_tokens", "user"}
        assert body["model"] == "qwen3-8b"
        assert body["stream"] is True
        assert body["max_tokens"] == 16
        assert body["user"] == session_id(1)
        assert body["tools"] == tools
    assert _bodies(1, 30_000)[0]["stream"] is False


def test_tool_definitions() -> None:
    tools = tool_definitions()
    names = [t["function"]["name"] for t in tools]
    assert {"Bash", "Read", "Edit", "Write", "Grep", "Glob", "TodoWrite"} <= set(names)
    assert len(names) == len(set(names))
    for t in tools:
        assert t["type"] == "function"
        fn = t["function"]
        assert fn["description"]
        assert fn["parameters"]["type"] == "object"
        assert set(fn["parameters"]["required"]) <= set(fn["parameters"]["properties"])
    assert tool_definitions() is not tools  # fresh each time: a caller may mutate its copy


@pytest.mark.parametrize("billing", [False, True])
def test_sessions_only_grow(billing: bool) -> None:
    bodies = _bodies(2, 300_000, billing_line=billing)
    assert len(bodies) > 20
    cchs = []
    for prev, nxt in pairwise(bodies):
        p, n = prev["messages"], nxt["messages"]
        assert n is not p
        assert len(n) > len(p)
        assert n[1 : len(p)] == p[1:]
        assert all(a is b for a, b in zip(n[1 : len(p)], p[1:], strict=True))
        if billing:
            assert _BILLING.sub("", n[0]["content"]) == _BILLING.sub("", p[0]["content"])
        else:
            assert n[0] is p[0]
    for body in bodies:
        system = body["messages"][0]["content"]
        m = _BILLING.match(system)
        assert (m is not None) == billing
        if m:
            cchs.append(m.group(1))
    if billing:
        assert all(a != b for a, b in pairwise(cchs))


def _check_shapes(messages: list[dict[str, Any]], tool_names: set[str]) -> None:
    assert messages[0]["role"] == "system"
    assert messages[1]["role"] == "user"
    assert messages[-1]["role"] in ("user", "tool")
    pending: list[str] = []  # tool_call ids of the latest assistant turn not yet answered
    seen_ids: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg["role"]
        assert role in _ROLES
        if role == "tool":
            assert set(msg) == {"role", "tool_call_id", "content"}
            assert pending and msg["tool_call_id"] == pending.pop(0)
            assert isinstance(msg["content"], str)
            continue
        assert not pending, f"message {i} before all tool calls were answered"
        if role != "assistant":
            assert set(msg) == {"role", "content"}
            assert isinstance(msg["content"], str) and msg["content"]
            assert role != "system" or i == 0
            continue
        assert set(msg) <= {"role", "content", "reasoning_content", "tool_calls"}
        reasoning = msg.get("reasoning_content")
        assert reasoning is None or (isinstance(reasoning, str) and reasoning)
        assert "<think>" not in (reasoning or "")
        calls = msg.get("tool_calls")
        if not calls:
            assert isinstance(msg["content"], str) and msg["content"]
            assert messages[i + 1]["role"] == "user"
            continue
        assert msg["content"] is None or isinstance(msg["content"], str)
        for call in calls:
            assert set(call) == {"id", "type", "function"}
            assert call["type"] == "function"
            assert call["id"] not in seen_ids
            seen_ids.add(call["id"])
            fn = call["function"]
            assert set(fn) == {"name", "arguments"}
            assert fn["name"] in tool_names
            assert isinstance(fn["arguments"], str)
            assert isinstance(json.loads(fn["arguments"]), dict)
            pending.append(call["id"])
    assert not pending  # every tool call is answered before the model's next turn


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_valid_shapes(seed: int) -> None:
    body = _last(seed, 400_000, billing=seed % 2 == 1)
    names = {t["function"]["name"] for t in body["tools"]}
    _check_shapes(body["messages"], names)
    # Every call of a short session is a complete, valid conversation too.
    for b in chat_requests(seed, target_chars=40_000):
        _check_shapes(b["messages"], names)
    _dump(body).encode("utf-8")  # strict UTF-8: no lone surrogates


@pytest.mark.parametrize(
    "shape",
    [
        Shape(single_calls=True),
        Shape(calls_alone=True),
        Shape(nine_char_ids=True),
        Shape(string_content=True),
    ],
)
def test_shapes_fit_a_template_and_keep_the_content(shape: Shape) -> None:
    """A shape changes only how the tool-call turns are laid out (the same text and calls,
    unless calls go alone), in a valid session that only grows."""
    plain = _last(2, 200_000)  # its tool-only turns have null content
    bodies = _bodies(2, 200_000, shape=shape)
    names = {t["function"]["name"] for t in plain["tools"]}
    for body in bodies[::10]:
        _check_shapes(body["messages"], names)
    for prev, nxt in pairwise(bodies):
        assert nxt["messages"][: len(prev["messages"])] == prev["messages"]
    messages = bodies[-1]["messages"]
    turns = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
    calls = [c for m in turns for c in m["tool_calls"]]
    if shape.single_calls:
        assert len(turns) > sum(bool(m.get("tool_calls")) for m in plain["messages"])
        assert all(len(m["tool_calls"]) == 1 for m in turns)
    if shape.nine_char_ids:
        assert all(re.fullmatch("[A-Za-z0-9]{9}", c["id"]) for c in calls)
    if shape.string_content:
        assert any(m.get("tool_calls") and m["content"] is None for m in plain["messages"])
        assert all(isinstance(m["content"], str) for m in turns)
    if shape.calls_alone:  # less text appended: later turns are drawn to other sizes
        assert all(not m["content"] for m in turns)
        return
    assert content_chars(messages) == content_chars(plain["messages"])
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        (c["function"]["name"], c["function"]["arguments"])
        for m in plain["messages"]
        for c in m.get("tool_calls") or ()
    ]


def test_session_structure() -> None:
    msgs = _last(0, 1_000_000)["messages"]
    asst = [m for m in msgs if m["role"] == "assistant"]
    with_calls = [m for m in asst if m.get("tool_calls")]
    assert any(len(m["tool_calls"]) >= 2 for m in with_calls)  # parallel tool calls
    assert any(not m.get("tool_calls") for m in asst)  # final answers
    assert all(m.get("reasoning_content") for m in asst)
    assert sum(m["role"] == "user" for m in msgs) >= 10
    used = {c["function"]["name"] for m in with_calls for c in m["tool_calls"]}
    assert {"Bash", "Read", "Edit", "Grep"} <= used
    # Tool-only turns carry "" or None, per session; both occur across sessions.
    empties = set()
    for seed in range(8):
        for m in _last(seed, 100_000)["messages"]:
            if m["role"] == "assistant" and m.get("tool_calls") and not m["content"]:
                empties.add(m["content"])
    assert empties == {"", None}
    plain = _bodies(1, 50_000, reasoning=False)[-1]
    assert all("reasoning_content" not in m for m in plain["messages"])


@pytest.mark.parametrize("target", [20_000, 100_000, 1_000_000])
def test_size_targets(target: int) -> None:
    sizes = [content_chars(b["messages"]) for b in chat_requests(6, target_chars=target)]
    assert sizes[-1] >= target
    assert all(s < target for s in sizes[:-1])
    assert all(a < b for a, b in pairwise(sizes))
    assert len(_dump(_last(6, target))) > target  # the JSON body is at least as large
    if target == 20_000:
        assert 3 <= len(sizes) <= 60
    assert len(_bodies(6, target, max_calls=3)) == min(3, len(sizes))


def test_append_sizes_heavy_tailed() -> None:
    sizes = [content_chars(b["messages"]) for b in chat_requests(9, target_chars=1_500_000)]
    apps = [b - a for a, b in pairwise(sizes)]
    mean = statistics.mean(apps)
    assert 0.75 * 1400 < mean < 1.3 * 1400
    assert statistics.median(apps) < mean
    assert max(apps) > 7 * 1400
    big = [
        content_chars(b["messages"])
        for b in chat_requests(9, target_chars=600_000, append_chars=4000)
    ]
    assert 0.75 * 4000 < statistics.mean(b - a for a, b in pairwise(big)) < 1.3 * 4000


_ADVERSARIAL: dict[str, str] = {
    "im_end_lookalike": re.escape("<|im_end|>"),
    "tool_call_lookalike": re.escape("<tool_call>"),
    "deepseek_lookalike": "<｜end▁of▁sentence｜>",
    "crlf": "\r\n",
    "lone_cr": "\r(?!\n)",
    "tab": "\t",
    "cjk": r"[\u4e00-\u9fff]",
    "zwj_emoji": "\u200d[\U0001f300-\U0001faff\u2640\u2642]",
    "odd_spaces": "[\u00a0\u200b\u3000\u202f]",
    "bom": "\ufeff",
    "ansi": "\x1b\\[3[12]m",
    "traceback": r"Traceback \(most recent call last\):\n  File \"",
    "unified_diff": r"diff --git a/\S+ b/\S+\nindex [0-9a-f]{7}\.\.[0-9a-f]{7}",
    "read_arrow": r"\n +\d+\u2192",
    "rust": r"impl |fn \w+\(|#\[derive\(",
}


@cache
def _tool_outputs() -> str:
    msgs = [*_last(1, 1_500_000)["messages"], *_last(2, 1_500_000, billing=True)["messages"]]
    return "\n".join(m["content"] for m in msgs if m["role"] == "tool")


@pytest.mark.parametrize("name", sorted(_ADVERSARIAL))
def test_adversarial_tool_outputs(name: str) -> None:
    assert re.search(_ADVERSARIAL[name], _tool_outputs()), name


def test_streamed_bodies_share_messages() -> None:
    """Bodies are cheap: each holds a new list over message dicts shared with the others."""
    it: Iterator[Body] = chat_requests(3, target_chars=200_000)
    first = next(it)
    rest = list(it)
    assert rest[-1]["messages"][0] is first["messages"][0]
    assert rest[-1]["tools"] is first["tools"]
    assert len(first["messages"]) == 2
