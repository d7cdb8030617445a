"""A Responses request reaches the template as vLLM 0.33's Responses endpoint hands it over.

Reference: vLLM's own functions, read from the pinned wheel and run as they are: the request
model's ``input_item_parsing`` (function calls, reasoning items and assistant messages
become the OpenAI SDK's models) then ``construct_input_messages`` (the chat messages), the
path of its non-harmony Responses rendering. Both sides' chat messages are then prepared as
vLLM's chat parser prepares them (``prepare_messages``, checked against vLLM elsewhere), in
both content formats: the template sees the same messages.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessageToolCallParam,
    ChatCompletionToolMessageParam,
)
from openai.types.chat.chat_completion_message_tool_call_param import Function
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseReasoningItem,
)
from openai.types.responses.response_function_tool_call_output_item import (
    ResponseFunctionToolCallOutputItem,
)
from pydantic import ValidationError

from app.errors import BadRequestError
from app.protocol.openai_chat import parse_chat_request
from app.protocol.responses_request import chat_body
from app.rendering.messages import prepare_messages
from app.tools import assets as app_assets
from tests.rendering.vllm_source import functions

CODEX = Path(__file__).parents[1] / "api" / "fixtures" / "responses_codex_session.json"


class _Refused(Exception):
    """vLLM's ``VLLMValidationError``."""

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)


@pytest.fixture(scope="module")
def vllm_messages(assets_dir: Path) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    sources = app_assets.servers(assets_dir)
    logger = logging.getLogger("vllm")
    (parse,) = functions(
        sources["vllm_responses_request"], ("input_item_parsing",),
        ResponseFunctionToolCall=ResponseFunctionToolCall,
        ResponseReasoningItem=ResponseReasoningItem, ResponseOutputMessage=ResponseOutputMessage,
        ValidationError=ValidationError, logger=logger, random_uuid=lambda: "0",
    ).values()  # fmt: skip
    utils = functions(
        sources["vllm_responses"],
        ("construct_input_messages", "construct_chat_messages_with_tool_call",
         "_construct_message_from_response_item", "_item_type", "_item_dict",
         "encode_custom_tool_input"),
        json=json, Iterable=Iterable, logger=logger, VLLMValidationError=_Refused,
        ResponseFunctionToolCall=ResponseFunctionToolCall,
        ResponseReasoningItem=ResponseReasoningItem, ResponseOutputMessage=ResponseOutputMessage,
        ResponseFunctionToolCallOutputItem=ResponseFunctionToolCallOutputItem,
        ChatCompletionMessageToolCallParam=ChatCompletionMessageToolCallParam,
        ChatCompletionAssistantMessageParam=ChatCompletionAssistantMessageParam,
        ChatCompletionToolMessageParam=ChatCompletionToolMessageParam, FunctionCallTool=Function,
        flat_namespace_tool_name=lambda namespace, name: f"{namespace}.{name}",
        CUSTOM_TOOL_INPUT_KEY="input",
    )  # fmt: skip

    def messages(body: dict[str, Any]) -> list[dict[str, Any]]:
        data = parse(None, copy.deepcopy(body))
        built: list[dict[str, Any]] = utils["construct_input_messages"](
            request_instructions=data.get("instructions"), request_input=data["input"]
        )
        return built

    return messages


def _codex_bodies() -> list[dict[str, Any]]:
    session = orjson.loads(CODEX.read_bytes())
    return [{**session["request"], "input": session["input"][:n]} for n in session["turns"]]


def _message(role: str, *texts: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role,
            "content": [{"type": kind, "text": text} for text in texts]}  # fmt: skip


def _reasoning(*summary: str, content: tuple[str, ...] = ()) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text} for text in summary],
    }
    if content:
        item["content"] = [{"type": "reasoning_text", "text": text} for text in content]
    return item


def _call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "run", "arguments": '{"a": 1}'}


def _output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


USER = _message("user", "Fix it.")
# Item orders and shapes beyond Codex's usual ones.
EDGES: dict[str, dict[str, Any]] = {
    "string input": {"instructions": "Be brief.", "input": "Hi."},
    "empty instructions": {"instructions": "", "input": [USER]},
    "developer items": {
        "input": [_message("developer", "Rules."), USER, _message("developer", "More", "rules.")]
    },
    "reasoning content over summary": {
        "input": [USER, _reasoning("sum", content=("thought",)), _call("c1"), _output("c1")]
    },
    "several summary parts": {
        "input": [USER, _reasoning("one", "two"), _call("c1"), _output("c1")]
    },
    "several text parts": {"input": [USER, _message("assistant", "a", "b"), USER]},
    "reasoning after the answer": {
        "input": [USER, _message("assistant", "Done."), _reasoning("why"), _call("c1")]
    },
    "reasoning last": {"input": [USER, _message("assistant", "Done."), USER, _reasoning("r")]},
    "two answers": {"input": [USER, _message("assistant", "a"), _message("assistant", "b"), USER]},
    "calls then text": {
        "input": [USER, _call("c1"), _call("c2"), _message("assistant", "x"), USER]
    },
    "string assistant content": {
        "input": [USER, {"type": "message", "role": "assistant", "content": "plain"}, USER]
    },
}
BODIES = {f"codex turn {k}": body for k, body in enumerate(_codex_bodies())} | EDGES


@pytest.mark.parametrize("name", sorted(BODIES))
def test_responses_messages_as_vllm_builds_them(
    name: str, vllm_messages: Callable[[dict[str, Any]], list[dict[str, Any]]]
) -> None:
    body = {"model": "m", **BODIES[name]}
    want = vllm_messages(body)
    try:
        got = parse_chat_request(chat_body(body)).messages
    except BadRequestError:
        pytest.fail(f"refused what vLLM takes: {want}")
    for fmt in ("string", "openai"):
        assert prepare_messages(got, fmt) == prepare_messages(want, fmt), fmt


ITEMS = st.sampled_from([
    USER, _message("developer", "Rules."), _message("system", "Mid."),
    _message("assistant", "a"), _message("assistant", "a", "b"),
    {"type": "message", "role": "assistant", "content": "plain"},
    _reasoning(), _reasoning("one"), _reasoning("one", "two"), _reasoning("s", content=("c",)),
    _call("c1"), _call("c2"), _output("c1"),
])  # fmt: skip


@given(st.text(max_size=3), st.lists(ITEMS, min_size=1, max_size=8))
def test_any_item_order_as_vllm_builds_it(
    vllm_messages: Callable[[dict[str, Any]], list[dict[str, Any]]],
    instructions: str,
    items: list[dict[str, Any]],
) -> None:
    body = {"model": "m", "instructions": instructions, "input": items}
    want, got = vllm_messages(body), chat_body(body)["messages"]
    for fmt in ("string", "openai"):
        assert prepare_messages(got, fmt) == prepare_messages(want, fmt)
