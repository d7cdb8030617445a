"""Tool calls of non-Qwen formats end to end: the proxy started on a model's real chat template
(``--tool-format`` left at ``auto``) and a stand-in upstream streaming the answer the way that
model writes it; the client reads reasoning and tool calls, and no marker of the format."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from app.config import Settings
from app.main import create_app
from app.tools import assets as app_assets
from tests.api.servers import StubUpstream, serving

MODEL = "m"
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
D, Q = "｜DSML｜", '<|"|>'
CASES = {
    # template stem: (format auto picks, the answer as the model writes it, reasoning)
    "GLM-4.7-Flash": (
        "glm47",
        "Paris, two days.</think>"
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
        "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>",
        "Paris, two days.",
    ),
    "MiniMax-M2": (
        "minimax_m2",
        'Paris, two days.\n</think>\n\n<minimax:tool_call>\n<invoke name="get_weather">\n'
        '<parameter name="city">Paris</parameter>\n<parameter name="days">2</parameter>\n'
        "</invoke>\n</minimax:tool_call>",
        "Paris, two days.\n",
    ),
    "ByteDance-Seed-OSS": (
        "seed_oss",
        "<seed:think>Paris, two days.</seed:think>"
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
        "<parameter=days>2</parameter>\n</function>\n</seed:tool_call>",
        "Paris, two days.",
    ),
    "deepseek-ai-DeepSeek-V4": (
        "deepseek_v32",
        f'<{D}tool_calls>\n<{D}invoke name="get_weather">\n'
        f'<{D}parameter name="city" string="true">Paris</{D}parameter>\n'
        f'<{D}parameter name="days" string="false">2</{D}parameter>\n'
        f"</{D}invoke>\n</{D}tool_calls>",
        None,
    ),
    "google-gemma-4-31B-it": (
        "gemma4",
        f"<|channel>thought\nParis, two days.<channel|>"
        f"<|tool_call>call:get_weather{{city:{Q}Paris{Q},days:2}}<tool_call|>",
        "\nParis, two days.",
    ),
    "moonshotai-Kimi-K2": (
        "kimi_k2",
        "<think>Paris, two days.</think><|tool_calls_section_begin|><|tool_call_begin|>"
        'functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris", "days": 2}'
        "<|tool_call_end|><|tool_calls_section_end|>",
        "Paris, two days.",
    ),
    "deepseek-ai-DeepSeek-V3.1": (
        "deepseek_v31",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "Paris", "days": 2}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        None,
    ),
    "Mistral-Small-3.2-24B-Instruct-2506": (
        "mistral",
        '[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris", "days": 2}',
        None,
    ),
    "unsloth-mistral-Devstral-Small-2507": (
        "mistral",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2}',
        None,
    ),
    "meta-llama-Llama-3.1-8B-Instruct": (
        "llama3_json",
        '{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}',
        None,
    ),
}


@pytest.fixture(scope="module")
def templates(assets_dir: Path) -> dict[str, Path]:
    return app_assets.templates(assets_dir)


@contextmanager
def proxy(upstream: str, tokenizer: Path, template: Path) -> Iterator[str]:
    settings = Settings(upstream=upstream, tokenizer=tokenizer, chat_template=template,
                        model=MODEL, alignment_check=False)  # fmt: skip
    with serving(create_app(settings)) as url:
        yield url


def streamed(url: str, body: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]], str]:
    """Content, reasoning, tool calls and finish reason, folded from the chunks."""
    content, reasoning, calls, finish = "", "", [], ""
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choice = orjson.loads(line[6:])["choices"][0]
            delta = choice["delta"]
            content += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            calls += delta.get("tool_calls") or []
            finish = choice.get("finish_reason") or finish
    return content, reasoning, calls, finish


@pytest.mark.parametrize("stem", sorted(CASES))
def test_the_format_of_the_template_reaches_the_client_as_fields(
    stem: str, templates: dict[str, Path], assets: dict[str, Path]
) -> None:
    fmt, answer, thought = CASES[stem]
    stub = StubUpstream(pieces=[answer[i : i + 5] for i in range(0, len(answer), 5)])
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Weather in Paris for two days?"}],
        "tools": [TOOL],
        "stream": True,
    }
    with stub.serve() as upstream, proxy(upstream, assets["qwen3"].parent, templates[stem]) as url:
        health = httpx.get(url + "/health", timeout=10).json()
        content, reasoning, calls, finish = streamed(url, body)
        whole = httpx.post(url + "/v1/chat/completions", json=body | {"stream": False},
                           timeout=30).json()["choices"][0]  # fmt: skip
    assert health["tool_format"] == fmt
    assert (content, reasoning or None, finish) == ("", thought, "tool_calls")
    assert [(c["index"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        (0, "get_weather", '{"city": "Paris", "days": 2}')
    ]
    message = whole["message"]
    assert message["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris", "days": 2}'
    assert message["content"] is None and message.get("reasoning_content") == thought


def test_deepseek_v31_thinking_opened_by_the_prompt_is_reasoning(
    templates: dict[str, Path], assets: dict[str, Path]
) -> None:
    """With ``thinking`` on, DeepSeek V3.1's template ends the prompt with ``<think>``: the
    answer starts inside reasoning and ``</think>`` ends it."""
    answer = "Paris in June: mild.</think>Expect about 24 °C."
    stub = StubUpstream(pieces=[answer[i : i + 5] for i in range(0, len(answer), 5)])
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Weather in Paris in June?"}],
        "chat_template_kwargs": {"thinking": True},
        "stream": True,
    }
    template = templates["deepseek-ai-DeepSeek-V3.1"]
    with stub.serve() as upstream, proxy(upstream, assets["qwen3"].parent, template) as url:
        content, reasoning, calls, finish = streamed(url, body)
        plain = streamed(url, body | {"chat_template_kwargs": {"thinking": False}})
    assert (content, reasoning, calls, finish) == (
        "Expect about 24 °C.",
        "Paris in June: mild.",
        [],
        "stop",
    )
    assert plain == (answer, "", [], "stop")
