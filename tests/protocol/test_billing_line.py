"""Claude Code's billing line leaves system turns as vLLM 0.33's chat parsing takes it off.

Reference: vLLM's own ``_strip_claude_code_billing_header`` and its header constant, read
from the pinned wheel's ``vllm/renderers/chat_utils/chat_message.py`` and run as they are,
on the contents as its ``parse_chat_message_content`` hands them over (a string as one text
part, only ``system`` messages).  Ours: ``parse_chat_request`` (the chat and Responses APIs)
and the Anthropic translation, which applies the same rule to the system turns it makes.
Both sides are compared as the template sees them (``prepare_message``, both formats)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.protocol.anthropic_request import to_chat_body
from app.protocol.billing_line import HEADER
from app.protocol.openai_chat import parse_chat_request
from app.protocol.responses_request import chat_body
from app.rendering.messages import prepare_message
from app.tools import assets as app_assets
from tests.rendering import vllm_source
from tests.rendering.vllm_source import Strip

Messages = list[dict[str, Any]]
LINE = HEADER + ": cc_version=2.1.328.e3b; cc_entrypoint=cli; cch=4d2f1;"


@pytest.fixture(scope="module")
def source(assets_dir: Path) -> Path:
    return app_assets.servers(assets_dir)["vllm_chat_message"]


@pytest.fixture(scope="module")
def vllm_strip(source: Path) -> Strip:
    return vllm_source.billing_strip(source)


def test_the_header_is_vllm_s(source: Path) -> None:
    assert vllm_source.billing_header(source) == HEADER


vllm_messages = vllm_source.billing_step


def seen(messages: Messages) -> list[list[dict[str, Any]]]:
    """What a template gets, in both content formats."""
    return [
        [prepare_message(i, m, fmt) for i, m in enumerate(messages)] for fmt in ("string", "openai")
    ]


# Texts near the rule's edges: the header with and without its line's rest, lines after it,
# an empty remainder, CRLF, the header later in the text, a prefix of it, another header.
texts = st.one_of(
    st.sampled_from(["", "\n", LINE, LINE + "\n", HEADER, HEADER + "\n\n", "You are Claude."]),
    st.builds(
        "".join,
        st.lists(
            st.sampled_from([LINE, HEADER, "\n", "\r\n", "x-anthropic", "You are Claude.", " "]),
            max_size=5,
        ),
    ),
    st.text(alphabet="ab\n", max_size=4).map(lambda t: LINE + t),
)
parts = st.one_of(
    texts.map(lambda t: {"type": "text", "text": t}),
    texts.map(lambda t: {"type": "input_text", "text": t}),  # not a "text" part: kept as it is
    texts.map(lambda t: {"type": "refusal", "refusal": t}),
)
contents = st.one_of(texts, st.lists(parts, max_size=4))
roles = st.sampled_from(["system", "system", "developer", "user"])
messages = st.lists(
    st.builds(lambda role, content: {"role": role, "content": content}, roles, contents),
    min_size=1,
    max_size=4,
)


@given(messages)
def test_chat_messages_as_vllm_parses_them(vllm_strip: Strip, sent: Messages) -> None:
    before = copy.deepcopy(sent)
    body = {"model": "m", "messages": sent}
    stripped = parse_chat_request(body, strip_billing_line=True)
    assert seen(stripped.messages) == seen(vllm_messages(before, vllm_strip))
    assert sent == before and stripped.body["messages"] is sent  # the request is kept as sent
    kept = parse_chat_request(body).messages  # off: never stripped
    assert kept is sent


def test_claude_code_s_system_turn(vllm_strip: Strip) -> None:
    """Its billing block alone (dropped) before the prompt's blocks; a string system prompt
    keeps the lines after the header's."""
    blocks = [LINE, "You are Claude Code.", LINE + "\nkept"]
    sent: Messages = [
        {"role": "system", "content": [{"type": "text", "text": t} for t in blocks]},
        {"role": "system", "content": LINE + "\nYou are a subagent."},
        {"role": "user", "content": LINE},
    ]
    got = parse_chat_request({"model": "m", "messages": sent}, strip_billing_line=True).messages
    assert got[0]["content"] == [
        {"type": "text", "text": "You are Claude Code."},
        {"type": "text", "text": "kept"},
    ]
    assert got[1]["content"] == [{"type": "text", "text": "You are a subagent."}]
    assert got[2] is sent[2]
    assert seen(got) == seen(vllm_messages(sent, vllm_strip))


anthropic_blocks = st.lists(texts.map(lambda t: {"type": "text", "text": t}), max_size=4)


@given(st.one_of(texts, anthropic_blocks), st.one_of(texts, anthropic_blocks))
def test_anthropic_system_turns_as_vllm_parses_our_chat_request(
    vllm_strip: Strip, system: Any, inline: Any
) -> None:
    """Our translation is a chat request: every system turn it makes (``system``, a
    ``role: "system"`` message) is stripped as vLLM's chat parsing would strip it."""
    body = {
        "model": "m",
        "max_tokens": 8,
        "system": system,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": inline},
            {"role": "user", "content": LINE},
        ],
    }
    translated = to_chat_body(body).body["messages"]
    stripped = to_chat_body(body, strip_billing_line=True).body["messages"]
    assert seen(stripped) == seen(vllm_messages(translated, vllm_strip))


def test_responses_instructions_are_a_system_turn(vllm_strip: Strip) -> None:
    """vLLM's Responses endpoint renders through the same chat parsing: ``instructions`` and
    system items lose the line, developer items keep it."""
    body = {
        "model": "m",
        "instructions": LINE + "\nYou are Codex.",
        "input": [
            {"role": "system", "content": [{"type": "input_text", "text": LINE + "\nsys"}]},
            {"role": "developer", "content": LINE + "\ndev"},
            {"role": "user", "content": "hi"},
        ],
    }
    canonical = chat_body(body)
    got = parse_chat_request(canonical, strip_billing_line=True).messages
    assert seen(got) == seen(vllm_messages(canonical["messages"], vllm_strip))
    texts_seen = [m["content"] for m in seen(got)[0]]
    assert texts_seen[0] == "You are Codex." and LINE in texts_seen[2]
