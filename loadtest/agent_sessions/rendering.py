"""Render tool calls and turns of a transcript in a chat markup."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .markup import Markup

_FMT_VAR = re.compile(r"\{(name|args|json)\}")


def format_call(m: Markup, name: str, args: dict[str, Any]) -> str:
    args_json = json.dumps(args, ensure_ascii=False)
    full = json.dumps({"name": name, m.args_key: args}, ensure_ascii=False)
    vals = {"name": name, "args": args_json, "json": full}
    return _FMT_VAR.sub(lambda mm: vals[mm.group(1)], m.tool_call_fmt)


def render_assistant(
    m: Markup, reasoning: str, prose: str, calls: Sequence[tuple[str, dict[str, Any]]]
) -> tuple[str, str]:
    """(rendering with the think block, rendering without it)."""
    body = prose
    if calls:
        rendered = m.tool_call_sep.join(format_call(m, n, a) for n, a in calls)
        body = (prose + m.content_tool_sep if prose else "") + (
            m.tool_calls_open + rendered + m.tool_calls_close
        )
    start = m.start("assistant")
    end = m.end_for("assistant")
    without = start + body + end
    if not reasoning:
        return without, without
    with_think = (
        start + m.think_open + reasoning.strip("\n") + m.think_close + body.lstrip("\n") + end
    )
    return with_think, without


def render_results(m: Markup, results: Sequence[str]) -> str:
    if m.group_tool_results:
        inner = m.tool_result_sep.join(
            m.tool_result_open + x + m.tool_result_close for x in results
        )
        return (
            m.start(m.tool_role)
            + m.tool_results_open
            + inner
            + m.tool_results_close
            + m.end_for(m.tool_role)
        )
    return "".join(
        m.start(m.tool_role)
        + m.tool_results_open
        + m.tool_result_open
        + x
        + m.tool_result_close
        + m.tool_results_close
        + m.end_for(m.tool_role)
        for x in results
    )


def render_user(m: Markup, text: str) -> str:
    return m.start("user") + text + m.end_for("user")
