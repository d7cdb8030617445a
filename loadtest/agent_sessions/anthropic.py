"""The same agent sessions as Anthropic Messages requests (what Claude Code sends)."""

from __future__ import annotations

import json
from typing import Any


def anthropic_body(chat: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat request body (``chat_requests``) as an Anthropic Messages body: the
    system message becomes ``system``; assistant reasoning, text and tool calls become
    thinking, text and tool_use blocks; tool results (and a user message right after them)
    become one user message of tool_result (and text) blocks."""
    system: str | None = None
    messages: list[dict[str, Any]] = []
    for message in chat["messages"]:
        role = message["role"]
        if role == "system":
            system = message["content"]
        elif role == "assistant":
            messages.append({"role": "assistant", "content": _assistant_blocks(message)})
        else:
            block = (
                {
                    "type": "tool_result",
                    "tool_use_id": message["tool_call_id"],
                    "content": message["content"],
                }
                if role == "tool"
                else {"type": "text", "text": message["content"]}
            )
            if messages and messages[-1]["role"] == "user":
                messages[-1] = {"role": "user", "content": [*messages[-1]["content"], block]}
            else:
                messages.append({"role": "user", "content": [block]})
    tools = [
        {
            "name": f["name"],
            "description": f.get("description", ""),
            "input_schema": f["parameters"],
        }
        for f in (tool["function"] for tool in chat.get("tools") or [])
    ]
    body: dict[str, Any] = {
        "model": chat["model"],
        "max_tokens": chat.get("max_tokens", 16),
        "messages": messages,
        "tools": tools,
        "stream": chat.get("stream", False),
    }
    if system is not None:
        body["system"] = system
    return body


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        blocks.append(
            {"type": "thinking", "thinking": message["reasoning_content"], "signature": ""}
        )
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call["function"]
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": function["name"],
                "input": json.loads(function["arguments"]),
            }
        )
    return blocks
