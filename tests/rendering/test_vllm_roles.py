"""Developer and system messages reach every real template as vLLM 0.33 hands them over.

Reference: vLLM's own role functions, read from the pinned wheel's ``vllm/renderers/hf.py``
and run as they are (``_detect_developer_role_support``, ``_convert_developer_to_system``,
``_consolidate_system_messages``, applied as its ``safe_apply_chat_template`` applies them),
on the messages as vLLM's parser makes them (``_as_vllm_passes_them``, a developer message
with its ``tools`` key), then transformers' ``apply_chat_template`` and HF encode. Ours: the
same conversation sent as an OpenAI chat request and as a Responses request (Codex's shape:
``instructions`` and developer items), rendered by ``load_template``'s template.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import pytest

from app.errors import TemplateError
from app.main import load_template
from app.protocol.openai_chat import parse_chat_request
from app.protocol.responses_request import chat_body
from app.rendering.messages import as_vllm_roles, prepare_messages, takes_developer
from app.tools import assets as app_assets
from tests.rendering import test_real_templates, vllm_source
from tests.rendering.test_real_templates import (
    PRINTS_PARTS,
    REPR,
    TOKENIZER_OF,
    TOOLS,
    _as_vllm_passes_them,
    _encoder,
)

hf_tokenizer = test_real_templates.hf_tokenizer  # the fixture, shared

VllmRoles = Callable[[str, list[dict[str, Any]]], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def vllm_roles(assets_dir: Path) -> VllmRoles:
    """vLLM's role step: (template text, parsed messages) -> the messages transformers gets."""
    return vllm_source.vllm_roles(app_assets.servers(assets_dir)["vllm_renderer"])


INSTRUCTIONS = "You are a coding agent. Be brief."
SANDBOX = "<permissions instructions>\nThe sandbox is read-only.\n</permissions instructions>"
ENVIRONMENT = "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"
QUESTION = "What does setup.py say about the version?"
CALL = {
    "id": "call00001",
    "type": "function",
    "function": {"name": "read_file", "arguments": json.dumps({"path": "setup.py"})},
}
TOOL_TURNS: list[dict[str, Any]] = [
    {"role": "assistant", "content": None, "reasoning_content": "Read it.", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call00001", "content": "version='1.2.3'"},
    {"role": "assistant", "content": "It is 1.2.3.", "reasoning_content": "Done."},
]


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


# OpenAI chat requests' messages with developer turns where Codex and other clients put them.
CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    # Codex: instructions, sandbox rules as developer, the environment as a user turn
    "codex": [
        {"role": "system", "content": INSTRUCTIONS},
        _text("developer", SANDBOX),
        _text("user", ENVIRONMENT),
        _text("user", QUESTION),
        *TOOL_TURNS,
        _text("user", "Thanks."),
    ],
    "developer first": [{"role": "developer", "content": INSTRUCTIONS}, _text("user", QUESTION)],
    "developer later": [
        {"role": "system", "content": INSTRUCTIONS},
        _text("user", QUESTION),
        *TOOL_TURNS,
        {
            "role": "developer",
            "content": [{"type": "text", "text": "Now"}, {"type": "text", "text": SANDBOX}],
        },
        _text("user", "Thanks."),
    ],
    "empty system": [
        {"role": "system", "content": ""},
        {"role": "developer", "content": SANDBOX},
        {"role": "developer", "content": ""},
        _text("user", QUESTION),
    ],
}


def _vllm_parsed(messages: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """vLLM's parser's messages: contents (``None`` as no parts) and arguments as it gives
    them, and a ``tools`` key on each developer message (``parse_chat_message_content``)."""
    out = _as_vllm_passes_them(
        [m if m["content"] is not None else {**m, "content": []} for m in messages], fmt
    )
    for message in out:
        if message["role"] == "developer":
            message["tools"] = None
    return out


def _reference(
    stem: str,
    messages: list[dict[str, Any]],
    model_files: dict[str, Path],
    hf_tokenizer: Callable[[str], Any],
    vllm_roles: VllmRoles,
) -> str | type[TemplateError]:
    """What vLLM renders for ``messages`` (as an OpenAI chat request), its part lists printed
    as their texts (test_real_templates: no Python repr ever reaches our prompts)."""
    path = model_files[f"template:{stem}"]
    source = path.read_text(encoding="utf-8")
    given = vllm_roles(source, _vllm_parsed(messages, load_template(path).content_format()))
    try:
        text = hf_tokenizer(TOKENIZER_OF[stem]).apply_chat_template(
            copy.deepcopy(given), tools=TOOLS, chat_template=source,
            add_generation_prompt=True, tokenize=False,
        )  # fmt: skip
    except jinja2.TemplateError:
        return TemplateError
    assert isinstance(text, str)
    if REPR in text:
        assert stem in PRINTS_PARTS
        for message in given:
            if isinstance(parts := message["content"], list):
                text = text.replace(str(parts), "\n".join(p["text"] for p in parts))
    return text


def _responses(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The Responses request Codex sends for the same conversation."""
    assert messages[0]["role"] == "system"
    items: list[dict[str, Any]] = []
    for message in messages[1:]:
        role, content = message["role"], message["content"]
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": content})  # fmt: skip
            continue
        if role == "assistant":
            items.append({"type": "reasoning", "summary": [
                {"type": "summary_text", "text": message["reasoning_content"]}]})  # fmt: skip
            for call in message.get("tool_calls", ()):
                function = call["function"]
                items.append({"type": "function_call", "call_id": call["id"],
                              "name": function["name"],
                              "arguments": function["arguments"]})  # fmt: skip
            if not content:
                continue
        kind = "output_text" if role == "assistant" else "input_text"
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        items.append({"type": "message", "role": role,
                      "content": [{"type": kind, "text": p["text"]} for p in parts]})  # fmt: skip
    tools = [{"type": "function", **t["function"]} for t in TOOLS]
    return {"model": "m", "instructions": messages[0]["content"], "input": items, "tools": tools}


def test_the_templates_that_take_developer_turns(model_files: dict[str, Path]) -> None:
    """vLLM's test of the template text, ours alike (a pinned list: a new template is looked
    at before it changes what a developer turn renders to)."""
    names = {"deepseek-ai-DeepSeek-V3.2", "deepseek-ai-DeepSeek-V4",
             "deepseek-ai-DeepSeek-V4-Flash-0731", "google-gemma-4-31B-it",
             "google-gemma-4-31B-it-interleaved", "MiniMax-M3", "openai-gpt-oss-120b"}  # fmt: skip
    taking = {
        stem
        for stem in TOKENIZER_OF
        if takes_developer(model_files[f"template:{stem}"].read_text(encoding="utf-8"))
    }
    assert taking == names


@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
def test_roles_as_vllms_own_functions_give_them(conversation: str, vllm_roles: VllmRoles) -> None:
    """The role step alone, in both content formats, for a template that names the role and
    one that does not: the messages vLLM's functions make of vLLM's parsed messages, less the
    ``None`` values transformers drops."""
    messages = CONVERSATIONS[conversation]
    for source in ("{{ messages }}", "{% if m.role == 'developer' %}{% endif %}"):
        for fmt in ("string", "openai"):
            want = vllm_roles(source, _vllm_parsed(messages, fmt))
            got = as_vllm_roles(prepare_messages(messages, fmt), source)
            assert _roles(got) == _roles(want), (source, fmt)


def _roles(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each message's role, content (and whether a plain string) and keys but reasoning's."""
    aliases = {"reasoning", "reasoning_content", "thinking"}
    return [
        (m["role"], type(m["content"]) is str, json.loads(json.dumps(m["content"])),
         sorted(k for k, v in m.items() if v is not None and k not in aliases))
        for m in messages
    ]  # fmt: skip


@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
@pytest.mark.parametrize("stem", sorted(TOKENIZER_OF))
def test_developer_turns_render_as_vllm_renders_them(
    stem: str,
    conversation: str,
    model_files: dict[str, Path],
    hf_tokenizer: Callable[[str], Any],
    vllm_roles: VllmRoles,
) -> None:
    messages = CONVERSATIONS[conversation]
    want = _reference(stem, messages, model_files, hf_tokenizer, vllm_roles)
    name = TOKENIZER_OF[stem]
    template = load_template(model_files[f"template:{stem}"], model_files[name])
    requests = {"chat": parse_chat_request({"model": "m", "messages": messages, "tools": TOOLS})}
    if messages[0]["role"] == "system" and messages[0]["content"]:  # Codex's instructions
        requests["responses"] = parse_chat_request(chat_body(_responses(messages)))
    for api, request in requests.items():
        if want is TemplateError:
            with pytest.raises(TemplateError):
                template.render(request.messages, tools=request.tools)
            continue
        got = template.render(request.messages, tools=request.tools)
        assert got == want, api
        reference = hf_tokenizer(name)
        ids = _encoder(model_files[name]).encode(got, add_special_tokens=False).ids
        assert ids == reference.encode(want, add_special_tokens=False), api


def test_an_unchanged_conversation_is_the_same_list() -> None:
    prepared = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert as_vllm_roles(prepared, "") is prepared
    with_developer = [{"role": "developer", "content": "d"}, *prepared[1:]]
    assert as_vllm_roles(with_developer, "'developer'") is with_developer
