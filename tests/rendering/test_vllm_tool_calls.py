"""Assistant tool calls reach the template as vLLM 0.33's ``_postprocess_messages`` leaves
them (read from the pinned wheel and run as it is): arguments as an object, ``{}`` for
anything that is not one; an empty ``tool_calls`` dropped; a call that is not a function's
refused. The one departure: arguments that are not valid JSON are a 400 here (vLLM renders
``{}``)."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.errors import BadRequestError
from app.rendering.messages import prepare_message
from app.tools import assets as app_assets
from tests.rendering.vllm_source import functions


class _Refused(Exception):
    """vLLM's ``VLLMValidationError``."""

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)


@pytest.fixture(scope="module")
def postprocess(assets_dir: Path) -> Any:
    path = app_assets.servers(assets_dir)["vllm_chat_message"]
    logger = logging.getLogger("vllm")
    (found,) = functions(
        path, ("_postprocess_messages",), json=json, logger=logger, VLLMValidationError=_Refused
    ).values()
    return found


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
arguments = st.one_of(
    json_values.map(json.dumps),  # valid JSON of any type, as a string
    st.sampled_from(["", "  ", "\n", "{", "{'a': 1}", "NaN", '{"a": 1} x']),
    st.dictionaries(st.text(max_size=3), json_values, max_size=3),
    json_values,
)
calls = st.fixed_dictionaries(
    {"id": st.just("call00001"), "function": st.fixed_dictionaries(
        {"name": st.just("run")}, optional={"arguments": arguments})},
    optional={"type": st.sampled_from(["function", "custom"])},
)  # fmt: skip


def _not_json(call: dict[str, Any]) -> bool:
    """Arguments that vLLM renders as ``{}`` and the proxy refuses."""
    text = call["function"].get("arguments")
    if not isinstance(text, str) or not text.strip():
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return True
    return False


@given(st.lists(calls, max_size=3))
def test_tool_calls_as_vllm_leaves_them(postprocess: Any, tool_calls: list[Any]) -> None:
    message = {"role": "assistant", "content": "", "tool_calls": tool_calls}
    want: list[dict[str, Any]] = [copy.deepcopy(message)]
    try:
        postprocess(want)
    except _Refused:
        with pytest.raises(BadRequestError):
            prepare_message(0, message, "string")
        return
    if any(map(_not_json, tool_calls)):
        with pytest.raises(BadRequestError, match="is not valid JSON"):
            prepare_message(0, message, "string")
        return
    got = prepare_message(0, message, "string")
    assert got.get("tool_calls") == want[0].get("tool_calls")
    assert message["tool_calls"] == tool_calls  # the request's own objects left as they were
