"""Functions of vLLM's own source, run as they are: read from the pinned wheel's files
(``app.tools.assets.servers``), never imported (their modules import torch and CUDA code)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any


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
