"""A turn the model's template refuses is a 400 in the client API's own error format, naming
the template's complaint, as vLLM 0.33 answers it (``safe_apply_chat_template`` turns the
template's exception into a 400 carrying the jinja error's text); nothing goes upstream.

The refusals are the real templates' (docs/models.md): llama.cpp's Kimi K2 templates append to
a list in their tool-call loop, which a sandbox (transformers', ours) forbids; Unsloth's
Devstral template reads ``content[0]`` of an assistant turn whose content is not a string, and
a tool-call turn has none (vLLM hands the template ``[]``). A small tokenizer stands in for the
model's: the refusal comes before any encode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.protocol.error_bodies import ApiName
from app.tools import assets as app_assets
from tests.api.servers import StubUpstream
from tests.api.test_error_formats import assert_api_error
from tests.api.test_faults import proxy

COMPLAINTS = {
    "Kimi-K2-Instruct": "line 41: access to attribute 'append' of 'list' object is unsafe.",
    "Kimi-K2-Thinking": "line 35: access to attribute 'append' of 'list' object is unsafe.",
    "unsloth-mistral-Devstral-Small-2507": "line 74: list object has no element 0",
}
ARGS = '{"command": "ls"}'
TOOL = {
    "name": "run",
    "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}
# One tool call and its result, as each client API sends it: (path, body).
REQUESTS: dict[ApiName, tuple[str, dict[str, Any]]] = {
    "chat": ("/v1/chat/completions", {"model": "m",
        "tools": [{"type": "function", "function": TOOL}],
        "messages": [
            {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call00001",
                "type": "function", "function": {"name": "run", "arguments": ARGS}}]},
            {"role": "tool", "tool_call_id": "call00001", "content": "a.py"},
        ]}),
    "messages": ("/v1/messages", {"model": "m", "max_tokens": 16,
        "tools": [{"name": "run", "description": TOOL["description"],
                   "input_schema": TOOL["parameters"]}],
        "messages": [
            {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "call00001",
                                               "name": "run", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call00001",
                                          "content": "a.py"}]},
        ]}),
    "responses": ("/v1/responses", {"model": "m", "tools": [{"type": "function", **TOOL}],
        "input": [
            {"type": "message", "role": "user", "content": "List the files."},
            {"type": "function_call", "call_id": "call00001", "name": "run", "arguments": ARGS},
            {"type": "function_call_output", "call_id": "call00001", "output": "a.py"},
        ]}),
}  # fmt: skip


@pytest.mark.parametrize("stem", sorted(COMPLAINTS))
def test_a_refused_turn_is_a_400_naming_the_templates_complaint(
    stem: str, smollm2_dir: Path, assets_dir: Path
) -> None:
    template = app_assets.templates(assets_dir)[stem]
    stub = StubUpstream()
    with stub.serve() as upstream, proxy(upstream, smollm2_dir, chat_template=template) as http:
        for api, (path, body) in REQUESTS.items():
            for stream in (False, True):
                reply = http.post(path, json={**body, "stream": stream})
                assert_api_error(reply, api, 400, "invalid_request_error")
                error = reply.json()["error"]
                assert error["message"] == f"chat template 'default', {COMPLAINTS[stem]}", api
                if api != "messages":
                    assert error["type"] == "invalid_request_error"
    assert stub.requests == []
