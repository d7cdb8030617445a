"""The loop memo is exact: a memoized render equals a fresh one (itself checked against
transformers) over generated sessions that grow, edit earlier messages, drop reasoning on a
new user turn, and change kwargs and tools between calls."""

from __future__ import annotations

import functools
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.rendering import ChatTemplate, RenderCache
from tests.rendering.strategies import TOOLS, assistant, conversation, tool, user
from tests.rendering.test_differential import QWEN3, SMOLLM2_CHATML, hf_tokenizer

NS_WRITER = (
    "{% set ns = namespace(n=0, seen='') %}{% for m in messages %}"
    "{% if m.role == 'user' %}{% set ns.n = ns.n + 1 %}{% set ns.seen = m.content[:3] %}"
    "{% endif %}[{{ loop.index0 }}:{{ ns.n }}:{{ ns.seen }}:{{ m.role }}]{% endfor %}{{ ns.n }}"
)


@functools.cache
def qwen3() -> ChatTemplate:
    return ChatTemplate.from_tokenizer_config(QWEN3 / "tokenizer_config.json")


edit = st.one_of(
    st.tuples(st.just("append"), st.lists(st.one_of(user, assistant(), tool), min_size=1,
                                          max_size=3)),
    st.tuples(st.just("replace"), st.integers(0, 50), st.one_of(user, assistant(), tool)),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("options"), st.sampled_from([None, TOOLS]),
              st.sampled_from([None, True, False]), st.booleans()),
)


@settings(max_examples=120, deadline=None)
@given(conversation(), st.lists(edit, min_size=1, max_size=8), st.randoms())
def test_memo_equals_fresh_render(conv: Any, edits: list[Any], rnd: Any) -> None:
    sent, _ = conv
    sent = list(sent)
    options: dict[str, Any] = {"tools": None, "thinking": None, "agp": True}
    cache = RenderCache()
    templates = [qwen3(), ChatTemplate(SMOLLM2_CHATML), ChatTemplate(NS_WRITER)]
    for step in [("options", None, None, True), *edits]:
        if step[0] == "append":
            sent += [pair[0] for pair in step[1]]
        elif step[0] == "replace" and sent:
            sent[step[1] % len(sent)] = step[2][0]
        elif step[0] == "delete" and len(sent) > 1:
            del sent[step[1] % len(sent)]
        elif step[0] == "options":
            options = {"tools": step[1], "thinking": step[2], "agp": step[3]}
        kwargs = {} if options["thinking"] is None else {"enable_thinking": options["thinking"]}
        for template in templates:
            fresh = template.render(sent, tools=options["tools"], chat_template_kwargs=kwargs,
                                    add_generation_prompt=options["agp"])
            memo = template.render(sent, tools=options["tools"], chat_template_kwargs=kwargs,
                                   add_generation_prompt=options["agp"], cache=cache,
                                   session="s")
            assert memo == fresh


def test_qwen3_main_loop_is_memoized_and_hits() -> None:
    variant = qwen3()._variants["default"]
    assert len(variant.plans) == 1  # the reverse scan reads messages|length: not memoized
    cache = RenderCache()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s"},
                                      {"role": "user", "content": "u"}]
    for i in range(30):
        messages = [*messages, {"role": "assistant", "content": f"a{i}",
                                "reasoning_content": f"r{i}"}]
        messages.append({"role": "user", "content": f"u{i}"} if i % 7 == 0 else
                        {"role": "tool", "content": f"t{i}"})
        got = qwen3().render(messages, cache=cache, session="x")
        expected = hf_tokenizer().apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True)
        assert got == expected
    memo = cache.session(f"{id(qwen3())}:default:x")
    assert memo.stats[0][0] == 0  # not switched off
    assert sum(len(t) for t in memo.tables.values()) > 60


def test_impure_or_escaping_loops_are_not_memoized() -> None:
    for source in [
        "{% for m in messages %}{{ strftime_now('%Y') }}{% endfor %}",
        "{% for m in messages %}{{ loop.cycle('a', 'b') }}{% endfor %}",
        "{% for m in messages %}{{ loop.length }}{% endfor %}",
        "{% for m in messages %}{% if loop.first %}{% break %}{% endif %}{% endfor %}",
        "{% macro f(x) %}{{ x }}{% endmacro %}{% for m in messages %}{{ f(m) }}{% endfor %}",
        "{% for m in messages if m.role %}{{ m }}{% endfor %}",
        "{% for m in messages %}{{ m }}{% else %}none{% endfor %}",
    ]:
        assert ChatTemplate(source)._variants["default"].plans == [], source


def test_memo_is_bounded_and_thread_safe() -> None:
    cache = RenderCache(max_sessions=4, max_chars=40_000)
    template = ChatTemplate(SMOLLM2_CHATML)
    errors: list[BaseException] = []

    def session(k: int) -> None:
        try:
            messages: list[dict[str, Any]] = []
            for i in range(40):
                messages.append({"role": "user", "content": f"{k}-{i}-" + "x" * 500})
                assert template.render(messages, cache=cache, session=str(k)) == \
                    template.render(messages)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache) <= 4
    assert all(memo.size <= 40_000 for memo in cache._sessions.values())
