"""Functions of vLLM's own source, run as they are: read from the pinned wheel's files
(``app.tools.assets.servers``), never imported (their modules import torch and CUDA code)."""

from __future__ import annotations

import ast
import copy
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast


def functions(path: Path, names: tuple[str, ...], **names_used: Any) -> dict[str, Any]:
    """The functions ``names`` of the module at ``path`` (top-level ones, or a top-level
    class's methods taken as plain functions), compiled without their decorators
    (``lru_cache``, ``classmethod``) and run in a namespace holding ``names_used`` (what their
    bodies read from the module's imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    scopes = [tree.body, *(n.body for n in tree.body if isinstance(n, ast.ClassDef))]
    found = [
        n for body in scopes for n in body if isinstance(n, ast.FunctionDef) and n.name in names
    ]
    assert sorted(n.name for n in found) == sorted(names), f"{path} lacks some of {names}"
    for node in found:
        node.decorator_list = []
    future = ast.ImportFrom(module="__future__", names=[ast.alias(name="annotations")], level=0)
    module = ast.fix_missing_locations(ast.Module(body=[future, *found], type_ignores=[]))
    space: dict[str, Any] = dict(names_used)
    exec(compile(module, str(path), "exec"), space)  # the pinned wheel's own code
    return {name: space[name] for name in names}


Messages = list[dict[str, Any]]
_ROLE_FUNCTIONS = (
    "_detect_developer_role_support",
    "_convert_developer_to_system",
    "_consolidate_system_messages",
)


@functools.cache
def vllm_roles(hf_renderer: Path) -> Callable[[str, Messages], Messages]:
    """vLLM's role step (``safe_apply_chat_template``'s condition, then its two calls, from
    ``vllm/renderers/hf.py`` at ``hf_renderer``): (template text, the messages vLLM's parser
    made) -> the messages transformers gets."""
    takes, to_system, merge = functions(hf_renderer, _ROLE_FUNCTIONS).values()

    def roles(template: str, messages: Messages) -> Messages:
        if any(m["role"] == "developer" for m in messages) and not takes(template):
            messages = merge(to_system(messages))
        return messages

    return roles


Strip = Callable[[list[Any]], list[Any]]


@functools.cache
def billing_strip(chat_message: Path) -> Strip:
    """vLLM's ``_strip_claude_code_billing_header`` (``vllm/renderers/chat_utils/chat_message.py``
    at ``chat_message``), with the header constant as that module defines it."""
    (found,) = functions(
        chat_message,
        ("_strip_claude_code_billing_header",),
        _CLAUDE_CODE_BILLING_HEADER=billing_header(chat_message),
        cast=cast,
        ChatCompletionContentPartParam=Any,
    ).values()
    return cast(Strip, found)


def billing_header(chat_message: Path) -> str:
    """The module's ``_CLAUDE_CODE_BILLING_HEADER``."""
    (value,) = [
        node.value.value
        for node in ast.parse(chat_message.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["_CLAUDE_CODE_BILLING_HEADER"]
        and isinstance(node.value, ast.Constant)
    ]
    return cast(str, value)


def billing_step(messages: Messages, strip: Strip) -> Messages:
    """The contents as vLLM's ``parse_chat_message_content`` passes them on to its part
    parsing: None as no part, a string as one text part, system messages through ``strip``."""
    out = []
    for message in messages:
        content = message.get("content")
        parts = [] if content is None else content
        parts = [{"type": "text", "text": parts}] if isinstance(parts, str) else parts
        if message["role"] == "system":
            parts = strip(copy.deepcopy(parts))
        out.append({**message, "content": parts})
    return out
