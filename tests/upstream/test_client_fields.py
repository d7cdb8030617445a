"""Only the proxy decides what the upstream is told: a client's server-side fields are refused
with a 400 naming them, harmless bookkeeping fields are dropped and counted, the chat body a
dialect forwards holds only fields the proxy reads, and ``continue_final_message`` renders as
transformers (so vLLM) renders it."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.protocol.chat_fields import READ
from app.rendering import ChatTemplate
from app.rendering.continuation import continued
from tests.upstream.test_dialects import MODEL, StandIn, proxy

SERVER_FIELDS: dict[str, Any] = {
    "kv_transfer_params": {
        "do_remote_prefill": True,
        "remote_host": "10.0.0.9",
        "remote_port": 7000,
        "remote_engine_id": "x",
    },
    "chat_template": "{{ 'owned' }}",
    "echo": True,
    "add_special_tokens": True,
    "prompt_token_ids": [1, 2, 3],
    "guided_json": {"type": "object"},
    "documents": [{"title": "t", "text": "x"}],
    "mm_processor_kwargs": {},
    "priority": -5,
    "cache_salt": "s",
}
"""Fields of vLLM's chat request that would change what the server renders, reads or
contacts, past the proxy's ids."""
MESSAGES = [{"role": "user", "content": "Say hi."}]


@pytest.fixture(scope="module", params=["vllm-chat", "llamacpp"])
def served(
    request: pytest.FixtureRequest, smollm2_dir: Path
) -> Iterator[tuple[str, httpx.Client, StandIn]]:
    with proxy(smollm2_dir, request.param) as (http, stand_in):
        yield request.param, http, stand_in


@pytest.mark.parametrize("name", sorted(SERVER_FIELDS))
def test_a_server_field_is_refused_naming_it(
    served: tuple[str, httpx.Client, StandIn], name: str
) -> None:
    _, http, stand_in = served
    sent = len(stand_in.requests)
    body = {
        "model": MODEL,
        "messages": MESSAGES,
        "max_tokens": 5,
        "stream": False,
        name: SERVER_FIELDS[name],
    }
    reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == name and name in reply.json()["error"]["message"]
    assert len(stand_in.requests) == sent  # nothing went upstream


def test_harmless_fields_are_dropped_and_counted(served: tuple[str, httpx.Client, StandIn]) -> None:
    _, http, stand_in = served
    body = {
        "model": MODEL,
        "messages": MESSAGES,
        "max_tokens": 5,
        "stream": False,
        "user": "u-1",
        "metadata": {"k": "v"},
        "store": False,
        "echo": None,
    }
    reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    _, sent = stand_in.requests[-1]
    assert not {"user", "metadata", "store", "echo"} & set(sent)
    metrics = http.get("/metrics").text
    assert 'toksplice_client_fields_dropped_total{field="metadata"}' in metrics


def test_the_forwarded_chat_body_holds_only_fields_the_proxy_reads(smollm2_dir: Path) -> None:
    with proxy(smollm2_dir, "vllm-chat") as (http, stand_in):
        body = {
            "model": MODEL,
            "messages": MESSAGES,
            "max_tokens": 5,
            "stream": False,
            "temperature": 0.5,
            "top_k": 3,
            "user": "u",
            "parallel_tool_calls": False,
        }
        assert http.post("/v1/chat/completions", json=body).status_code == 200
        _, sent = stand_in.requests[-1]
    assert set(sent) <= READ | {"kv_transfer_params"}
    assert set(sent["kv_transfer_params"]) == {"prompt_token_ids"}
    assert sent["temperature"] == 0.5 and sent["top_k"] == 3 and "user" not in sent


# --- continue_final_message --------------------------------------------------------------


@functools.cache
def _hf(folder: Path) -> Any:
    import transformers

    return transformers.AutoTokenizer.from_pretrained(str(folder))


def _prefilled(answer: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": answer},
    ]


@pytest.mark.parametrize("folder", ["qwen3", "smollm2"])
@settings(max_examples=40, deadline=None)
@given(answer=st.text(st.sampled_from(" \n\tab{}é日<>"), max_size=12).map(lambda s: "Re" + s))
def test_continuation_renders_as_transformers_does(
    folder: str, answer: str, assets: dict[str, Path]
) -> None:
    path = assets[folder].parent
    messages = _prefilled(answer)
    want = _hf(path).apply_chat_template(
        messages, tokenize=False, add_generation_prompt=False, continue_final_message=True
    )
    template = ChatTemplate.from_tokenizer_config(path / "tokenizer_config.json")
    rendered = template.render_pieces(messages, add_generation_prompt=False)
    assert continued(rendered, messages[-1]).text() == want


def test_a_continued_answer_goes_upstream_as_those_ids(smollm2_dir: Path) -> None:
    messages = _prefilled("The colour is")
    text = _hf(smollm2_dir).apply_chat_template(
        messages, tokenize=False, add_generation_prompt=False, continue_final_message=True
    )
    tokenizer = Tokenizer.from_file(str(smollm2_dir / "tokenizer.json"))
    with proxy(smollm2_dir, "vllm-completions") as (http, stand_in):
        body = {
            "model": MODEL,
            "messages": messages,
            "max_tokens": 5,
            "stream": False,
            "continue_final_message": True,
            "add_generation_prompt": False,
        }
        assert http.post("/v1/chat/completions", json=body).status_code == 200
        _, sent = stand_in.requests[-1]
        assert sent["prompt"] == tokenizer.encode(text, add_special_tokens=False).ids
        body["add_generation_prompt"] = True  # vLLM refuses both at once
        reply = http.post("/v1/chat/completions", json=body)
        assert reply.status_code == 400 and "continue_final_message" in reply.text
