"""Loading, transformers' environment semantics, content formats and the error paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.api.errors import status_of
from app.errors import BadRequestError, TemplateError
from app.rendering import ChatTemplate, detect_content_format, prepare_messages
from app.rendering.environment import make_environment
from app.tools import assets

QWEN3_CONFIG = assets.default_dir() / "qwen3" / "tokenizer_config.json"
SMOLLM2_GGUF = assets.default_dir() / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
USER = [{"role": "user", "content": "hi"}]


def hf_render(template: str, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    utils = pytest.importorskip("transformers.utils.chat_template_utils")
    rendered, _ = utils.render_jinja_template(
        conversations=[messages], chat_template=template, **kwargs
    )
    out = rendered[0]
    assert isinstance(out, str)
    return out


# Templates exercising each piece of transformers' environment; each must render the same.
SEMANTICS = [
    "{{ messages | tojson }}",
    "{{ messages | tojson(indent=2) }}",
    "{{ {'b': 'é', 'a': [1, 2.5, none, true]} | tojson(sort_keys=true) }}",
    "{{ {'a': 1} | tojson(separators=(',', ':')) }}",
    "{{ {'x': '<b>&'} | tojson(ensure_ascii=true) }}",
    "{% for m in messages %}{% if loop.first %}{% continue %}{% endif %}{{ m.role }}"
    "{% break %}{% endfor %}",
    "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
    "{% endfor %}{{ ns.n }}",
    "{{ dict(a=1, b=2) | tojson }}{{ dict.fromkeys(['x'], 0) | tojson }}",
    "{% generation %}{% set x = 1 %}[{{ x }}]{% endgeneration %}{{ x is defined }}",
    "  {% if true %}\n  indented\n  {% endif %}\nend",
    "{{ bos_token }}|{{ eos_token }}|{{ undefined_thing }}|{{ messages[0].missing }}",
    "{{ messages[0]['content'].upper() }}{{ messages[0].content.split('i') }}",
    "{{ messages | length }}{{ messages[-1].role | title }}",
    "{{ strftime_now('%Y') | length }}",
]


@pytest.mark.parametrize("source", SEMANTICS)
def test_environment_matches_transformers(source: str) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    specials = {"bos_token": "<s>", "eos_token": "</s>"}
    expected = hf_render(source, messages, add_generation_prompt=True, **specials)
    got = ChatTemplate(source, special_tokens=specials).render(messages)
    assert got == expected


def test_namespace_refuses_underscore_names() -> None:
    template = ChatTemplate("{% set ns = namespace(_x=1) %}{{ ns._x }}")
    with pytest.raises(TemplateError, match="underscore"):
        template.render(USER)


@pytest.mark.parametrize(
    "source",
    [
        "{{ messages.__class__ }}",
        "{{ messages.__class__.__name__ }}",
        "{{ ''.__class__.__mro__[1] }}",
        "{{ messages.append(1) }}",
        "{{ messages[0].clear() }}",
        "{{ messages[0].update(role='x') }}",
        "{{ messages[0].items() | list }}",
        "{{ 'a{0.__class__}'.format(1) }}",
        "{{ messages.pop }}",
    ],
)
def test_sandbox_decisions_match(source: str) -> None:
    """Same rendering, or both refuse, as transformers' sandbox (ours caches its checks)."""
    utils = pytest.importorskip("transformers.utils.chat_template_utils")
    try:
        expected: str | None = utils.render_jinja_template(
            conversations=[USER], chat_template=source
        )[0][0]
    except Exception:
        expected = None
    try:
        got: str | None = ChatTemplate(source).render(USER, add_generation_prompt=False)
    except TemplateError:
        got = None
    assert got == expected


def test_raise_exception_message_is_kept() -> None:
    template = ChatTemplate(
        "{% if messages[0].role != 'system' %}"
        "{{ raise_exception('System message required') }}{% endif %}"
    )
    with pytest.raises(TemplateError) as info:
        template.render(USER)
    assert str(info.value) == "System message required"
    assert status_of(info.value) == 400


def test_runtime_errors_name_the_line() -> None:
    template = ChatTemplate("a\n{{ messages[0].content.nope.deeper }}")
    with pytest.raises(TemplateError, match=r"line 2: 'str object' has no attribute 'nope'"):
        template.render(USER)
    with pytest.raises(TemplateError, match=r"line 1: TypeError"):
        ChatTemplate("{{ messages[0].content + 1 }}").render(USER)


def test_syntax_error_at_load() -> None:
    with pytest.raises(TemplateError, match="does not compile"):
        ChatTemplate("{% for x in %}")


@pytest.mark.parametrize(
    "key",
    [
        "messages",
        "tools",
        "add_generation_prompt",
        "documents",
        "raise_exception",
        "namespace",
        "chat_template",
    ],
)
def test_reserved_kwargs_are_rejected(key: str) -> None:
    with pytest.raises(BadRequestError, match=key):
        ChatTemplate("{{ 1 }}").render(USER, chat_template_kwargs={key: 1})


def test_kwargs_override_special_tokens_like_transformers() -> None:
    template = ChatTemplate("{{ eos_token }}{{ flag }}", special_tokens={"eos_token": "E"})
    assert template.render(USER, chat_template_kwargs={"eos_token": "X", "flag": 1}) == "X1"


def test_tokenizer_config_named_templates(tmp_path: Path) -> None:
    config = {
        "chat_template": [
            {"name": "default", "template": "D{{ tools is none }}"},
            {"name": "tool_use", "template": "T{{ tools | length }}"},
        ],
        "bos_token": {"content": "<s>", "lstrip": False},
        "eos_token": "</s>",
        "unk_token": None,
    }
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps(config))
    template = ChatTemplate.from_tokenizer_config(path)
    assert template.names == ("default", "tool_use")
    assert template.special_tokens == {"bos_token": "<s>", "eos_token": "</s>"}
    assert template.render(USER) == "DTrue"
    assert template.render(USER, tools=[{"type": "function"}]) == "T1"
    pinned = ChatTemplate.from_tokenizer_config(config, name="default")
    assert pinned.render(USER, tools=[{"type": "function"}]) == "DFalse"
    with pytest.raises(TemplateError, match="no chat template named"):
        ChatTemplate.from_tokenizer_config(config, name="nope")
    with pytest.raises(TemplateError, match="none named 'default'"):
        ChatTemplate({"a": "x", "b": "y"})
    with pytest.raises(TemplateError, match="no chat_template"):
        ChatTemplate.from_tokenizer_config({"eos_token": "x"})


def test_jinja_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jinja"
    path.write_text("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}")
    template = ChatTemplate.from_jinja_file(path, special_tokens={"bos_token": "B"})
    assert template.render(USER) == "Bhi"
    with pytest.raises(TemplateError, match="cannot read"):
        ChatTemplate.from_jinja_file(tmp_path / "missing.jinja")


def test_gguf() -> None:
    pytest.importorskip("app.gguf_file")
    if not SMOLLM2_GGUF.exists():
        pytest.skip("SmolLM2 GGUF asset not fetched")
    template = ChatTemplate.from_gguf(SMOLLM2_GGUF)
    assert template.special_tokens["eos_token"] == "<|im_end|>"
    config = json.loads((SMOLLM2_GGUF.parent / "tokenizer_config.json").read_text())
    assert template.source() == config["chat_template"]
    assert template.render(USER) == hf_render(
        config["chat_template"], USER, add_generation_prompt=True
    )


OPENAI_TEMPLATE = (
    "{% for message in messages %}{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}[{{ part['type'] }}:{{ part['text'] }}]"
    "{% endfor %}{% endif %}{% endfor %}"
)
ALIASED_OPENAI_TEMPLATE = (
    "{% set loop_messages = messages[1:] %}{% for m in loop_messages %}"
    "{% for c in m.content | list %}{{ c.text }}{% endfor %}{% endfor %}"
)


def test_content_format_detection() -> None:
    env = make_environment()
    qwen3 = json.loads(QWEN3_CONFIG.read_text())["chat_template"]
    assert detect_content_format(env.parse(qwen3)) == "string"
    assert ChatTemplate.from_tokenizer_config(QWEN3_CONFIG).content_format() == "string"
    assert detect_content_format(env.parse(OPENAI_TEMPLATE)) == "openai"
    assert detect_content_format(env.parse(ALIASED_OPENAI_TEMPLATE)) == "openai"
    # vLLM 0.33's other ways in: a bare ``content`` outside macros, a macro parameter that is
    # passed a message's content, and ``messages`` through a namespace.
    assert detect_content_format(env.parse("{% for c in content %}{% endfor %}")) == "openai"
    inside_macro = "{% macro f(content) %}{% for c in content %}{% endfor %}{% endmacro %}"
    assert detect_content_format(env.parse(inside_macro)) == "string"
    passed = inside_macro + "{% for m in messages %}{{ f(m['content']) }}{% endfor %}"
    assert detect_content_format(env.parse(passed)) == "openai"
    by_keyword = inside_macro + "{% for m in messages %}{{ f(content=m.content) }}{% endfor %}"
    assert detect_content_format(env.parse(by_keyword)) == "openai"
    spaced = (
        "{% set ns = namespace(rest=messages[1:]) %}{% for m in ns.rest %}"
        "{% for c in m.content %}{% endfor %}{% endfor %}"
    )
    assert detect_content_format(env.parse(spaced)) == "openai"


def test_parts_print_as_their_text_never_as_a_repr() -> None:
    # Loops over content (so "openai") and prints it as it is, as Kimi K2's template does.
    source = (
        "{% for m in messages %}[{{ m.content }}|{{ m.content | trim }}|{{ '' ~ m.content }}]"
        "{% if m.content is not string %}{% for p in m.content %}<{{ p.text }}>{% endfor %}"
        "{% endif %}{{ m.content | tojson }}{% endfor %}"
    )
    template = ChatTemplate(source)
    assert template.content_format() == "openai"
    parts = [{"type": "text", "text": " a"}, {"type": "text", "text": "b"}]
    got = template.render(
        [{"role": "user", "content": parts}, {"role": "assistant", "content": ""}]
    )
    assert got == (
        '[ a\nb|a\nb| a\nb]< a><b>[{"type": "text", "text": " a"}, {"type": "text", "text": "b"}]'
        '[||]<>[{"type": "text", "text": ""}]'
    )


def test_openai_format_gets_parts() -> None:
    template = ChatTemplate(OPENAI_TEMPLATE)
    messages = [
        {"role": "user", "content": "plain"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, "b"]},
        {
            "role": "tool",
            "content": [{"type": "text", "text": "t1"}, {"type": "text", "text": "t2"}],
        },
    ]
    assert template.render(messages) == "[text:plain][text:a][text:b]t1\nt2"


@pytest.mark.parametrize("fmt", ["string", "openai"])
@pytest.mark.parametrize(
    "part",
    [
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
        {"image_url": "http://x/y.png"},
    ],
)
def test_media_parts_are_refused(fmt: Any, part: dict[str, Any]) -> None:
    messages = [
        {"role": "user", "content": "x"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, part]},
    ]
    with pytest.raises(BadRequestError, match=r"messages\[1\]\.content\[1\].*text only"):
        prepare_messages(messages, fmt)


def test_tool_call_arguments() -> None:
    def call(arguments: Any) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "f", "arguments": arguments}}
            ],
        }

    sent = [call('{"a": [1, {"b": "é"}]}'), call(""), call(None), call({"k": 1})]
    out = prepare_messages(sent, "string")
    assert [m["tool_calls"][0]["function"]["arguments"] for m in out] == [
        {"a": [1, {"b": "é"}]},
        {},
        {},
        {"k": 1},
    ]
    assert sent[0]["tool_calls"][0]["function"]["arguments"] == '{"a": [1, {"b": "é"}]}'
    assert out[0]["content"] == ""
    with pytest.raises(BadRequestError, match=r"messages\[1\]\.tool_calls\[0\].*not valid JSON"):
        prepare_messages([{"role": "user", "content": "x"}, call("{oops")], "string")


def test_message_shape() -> None:
    out = prepare_messages(
        [
            {
                "role": "assistant",
                "content": "x",
                "tool_calls": [],
                "reasoning": "r",
                "extra": 1,
                "name": "bot",
            },
            {"role": "tool", "content": "y", "tool_call_id": None},
        ],
        "string",
    )
    assert out[0] == {
        "thinking": "r",
        "role": "assistant",
        "content": "x",
        "reasoning": "r",
        "reasoning_content": "r",
        "name": "bot",
    }
    assert list(out[0]) == ["thinking", "role", "content", "reasoning", "reasoning_content", "name"]
    assert out[1] == {"role": "tool", "content": "y"}


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{"content": "x"}],
        [{"role": "user", "content": 5}],
        ["nope"],
        [{"role": "user", "content": [{"type": "mystery"}]}],
    ],
)
def test_malformed_messages(messages: Any) -> None:
    with pytest.raises(BadRequestError):
        ChatTemplate("{{ 1 }}").render(messages)


def test_tools_reach_the_template_as_vllm_dumps_them() -> None:
    tools = [
        {"function": {"parameters": {"type": "object"}, "x-extra": 1, "name": "a"},
         "type": "function", "defer_loading": True},
        {"type": "function", "function": {"strict": True, "description": "d", "name": "b"}},
    ]  # fmt: skip
    got = ChatTemplate("{{ tools | tojson }}").render(USER, tools=tools)
    assert json.loads(got) == [
        {"type": "function", "defer_loading": True, "function": {
            "name": "a", "description": None, "parameters": {"type": "object"},
            "defer_loading": True}},
        {"type": "function", "function": {
            "name": "b", "description": "d", "parameters": None, "strict": True}},
    ]  # fmt: skip
    orders = json.loads(got, object_pairs_hook=lambda pairs: [key for key, _ in pairs])
    assert orders == [["type", "function", "defer_loading"], ["type", "function"]]
    functions = [t["function"] for t in json.loads(got, object_pairs_hook=dict)]
    assert [list(f) for f in functions] == [
        ["name", "description", "parameters", "defer_loading"],
        ["name", "description", "parameters", "strict"],
    ]
