"""Hypothesis strategies: agent-like chat requests, each with the messages a client sends and
the messages transformers must see once vLLM has processed them (built independently of
``app.rendering.messages``: tool-call arguments are generated as objects and sent as JSON)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

LOOKALIKES = ["<|im_end|>", "<|im_start|>", "<think>", "</think>", "<tool_call>",
              "</tool_call>", "<tool_response>", "</tool_response>", "\n", "\n\n", "{", "}",
              '"', "\\", "é", "日本語", "👩‍💻", "\u200b", "\r\n", " "]

text = st.one_of(
    st.text(max_size=20),
    st.lists(st.one_of(st.sampled_from(LOOKALIKES), st.text(max_size=6)), max_size=8).map(
        "".join
    ),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(text, json_values, max_size=4)
TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]}}},
    {"type": "function", "function": {"name": "run", "description": "Run <|im_end|> ünïcode",
     "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}},
]


@st.composite
def tool_call(draw: st.DrawFn, index: int) -> tuple[dict[str, Any], dict[str, Any]]:
    args = draw(arguments)
    encoded = json.dumps(args, ensure_ascii=draw(st.booleans()), indent=draw(
        st.sampled_from([None, 2])))
    name = draw(st.sampled_from(["read_file", "run", "weird<|im_end|>"]))
    sent = {"id": f"call_{index}", "type": "function",
            "function": {"name": name, "arguments": encoded}}
    seen = {"id": f"call_{index}", "type": "function",
            "function": {"name": name, "arguments": args}}
    return sent, seen


@st.composite
def assistant(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    content = draw(st.one_of(
        text,
        st.builds(lambda r, c: f"<think>\n{r}\n</think>\n\n{c}", text, text),
        st.builds(lambda r, c: f"{r}</think>{c}", text, text),
        st.none(),
    ))
    calls = draw(st.lists(st.integers(0, 999).flatmap(tool_call), max_size=3))
    sent: dict[str, Any] = {"role": "assistant", "content": content}
    seen: dict[str, Any] = {"role": "assistant", "content": "" if content is None else content}
    if calls or draw(st.booleans()):
        sent["tool_calls"] = [c[0] for c in calls]
        if calls:
            seen["tool_calls"] = [c[1] for c in calls]
    reasoning = draw(st.none() | text)
    if reasoning is not None:
        key = draw(st.sampled_from(["reasoning_content", "reasoning"]))
        sent[key] = reasoning
        seen["reasoning_content"] = reasoning
    return sent, seen


def _same(message: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return message, dict(message)


user = st.one_of(
    text.map(lambda t: {"role": "user", "content": t}),
    text.map(lambda t: {"role": "user", "content": f"<tool_response>{t}</tool_response>"}),
).map(_same)
tool = text.map(lambda t: {"role": "tool", "tool_call_id": "call_0", "content": t}).map(_same)


@st.composite
def conversation(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages as sent, messages as transformers must see them)."""
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if draw(st.booleans()):
        pairs.append(_same({"role": "system", "content": draw(text)}))
    for _ in range(draw(st.integers(1, 6))):
        pairs.append(draw(st.one_of(user, assistant(), tool)))
        if pairs[-1][0]["role"] == "assistant" and draw(st.booleans()):
            pairs.extend(draw(st.lists(tool, min_size=1, max_size=3)))
    return [p[0] for p in pairs], [p[1] for p in pairs]


render_options = st.fixed_dictionaries({
    "tools": st.sampled_from([None, [], TOOLS]),
    "add_generation_prompt": st.booleans(),
    "enable_thinking": st.sampled_from([None, True, False]),
})
