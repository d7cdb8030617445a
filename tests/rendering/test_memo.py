"""The render memo is exact: a memoized render equals a fresh one (itself checked against
transformers) over generated sessions that grow, edit or delete earlier messages, resend
messages as ``==`` but differently typed or ordered twins, drop reasoning on a new user
turn, and change kwargs and tools between calls; and Qwen3's steady state takes the fast
path (counters, not timings)."""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.errors import TemplateError
from app.rendering import ChatTemplate, RenderCache, replay
from app.rendering.environment import TemplateNamespace
from app.rendering.loops import Threshold
from app.rendering.memo import RenderMemos, SessionMemo
from app.rendering.scan import scan
from app.sessions.registry import SessionRegistry, Slot
from app.tools import assets
from tests.rendering.strategies import TOOLS, assistant, conversation, tool, user
from tests.rendering.test_differential import QWEN3, SMOLLM2_CHATML, hf_tokenizer

NS_WRITER = (
    "{% set ns = namespace(n=0, seen='') %}{% for m in messages %}"
    "{% if m.role == 'user' %}{% set ns.n = ns.n + 1 %}{% set ns.seen = m.content[:3] %}"
    "{% endif %}[{{ loop.index0 }}:{{ ns.n }}:{{ ns.seen }}:{{ m.role }}]{% endfor %}{{ ns.n }}"
)
# Shows key order and value types of everything prepared (twins must not be confused).
DUMP = "{% for m in messages %}{{ m | tojson }}{{ '|' if loop.last }}\n{% endfor %}"
# Thresholds (a namespace attribute the loop reads only compared with the loop index),
# moved by every user turn; the first loop writes namespace state.
THRESHOLDS = (
    "{% set ns = namespace(q=-1) %}{% for m in messages %}{% if m.role == 'user' %}"
    "{% set ns.q = loop.index0 %}{% endif %}{% endfor %}{% for m in messages %}{{ m.role }}"
    "{% if loop.index0 > ns.q %}>{% endif %}{% if ns.q == loop.index %}={% endif %};"
    "{% endfor %}"
)
# Unguarded neighbours: messages[-1] is the last message when loop.index0 is 0.
NEIGHBOURS = (
    "{% for m in messages %}{{ messages[loop.index0 - 1].role }}<{{ m.role }}>"
    "{{ (messages[loop.index0 + 1] or {}).role }}{{ messages[0].role }};{% endfor %}"
)
# State written from a neighbour that changes (messages[-1]) before a replayable run.
STATE_FROM_LAST = (
    "{% set ns = namespace(x='') %}{% for m in messages %}{% if loop.first %}"
    "{% set ns.x = messages[loop.index0 - 1].role %}{% endif %}{{ ns.x }}:{{ m.role }};"
    "{% endfor %}"
)
# Outer values read by the loop, changed by the options steps.
OPTIONS = (
    "{% for m in messages %}{% if tools %}T{% endif %}{{ enable_thinking }}"
    "{{ add_generation_prompt }}{{ m.role }};{% endfor %}"
)
# A threshold on a namespace that the loop also writes through another name: no replay.
ALIASED = (
    "{% set ns = namespace(a=0) %}{% set other = ns %}{% for m in messages %}"
    "{% if m.role == 'user' %}{% set ns.a = loop.index0 %}{% endif %}"
    "{{ loop.index0 > other.a }}{% endfor %}"
)
# A threshold on a value that is not an int (compared as a whole value instead).
TEXT_THRESHOLD = (
    "{% set ns = namespace(q='3') %}{% for m in messages %}"
    "{{ loop.index0|string > ns.q }}{{ m.role }}{% endfor %}"
)

# A macro that reads an outer value and counts in an outer namespace (its effects are the
# loop's reads and writes), another that calls it, and one with its own namespace.
MACROS = (
    "{% set ns = namespace(n=0) %}{% macro count(m) %}{% if m.role == 'user' %}"
    "{% set ns.n = ns.n + 1 %}{% endif %}{{ ns.n }}{{ tools is none }}{% endmacro %}"
    "{% macro both(m) %}({{ count(m) }}){% endmacro %}"
    "{% macro own(text) %}{% set mine = namespace(k=0) %}{% for c in text %}"
    "{% set mine.k = mine.k + 1 %}{% endfor %}{{ mine.k }}{% endmacro %}"
    "{% for m in messages %}{{ both(m) }}{{ own(m.content or '') }}{{ m.role }};{% endfor %}"
)
# The neighbouring items, as ``loop`` gives them.
NEIGHBOUR_ITEMS = (
    "{% for m in messages %}{{ loop.previtem.role if loop.previtem }}"
    "{{ loop.previtem.content if loop.previtem }}<{{ m.role }}>"
    "{{ loop.nextitem.content if not loop.last }};{% endfor %}"
)


@functools.cache
def qwen3() -> ChatTemplate:
    return ChatTemplate.from_tokenizer_config(QWEN3 / "tokenizer_config.json")


@functools.cache
def templates() -> list[ChatTemplate]:
    return [
        qwen3(),
        ChatTemplate(SMOLLM2_CHATML),
        ChatTemplate(NS_WRITER),
        ChatTemplate(DUMP),
        ChatTemplate(ALIASED),
        ChatTemplate(TEXT_THRESHOLD),
        ChatTemplate(THRESHOLDS),
        ChatTemplate(NEIGHBOURS),
        ChatTemplate(STATE_FROM_LAST),
        ChatTemplate(OPTIONS),
        ChatTemplate(MACROS),
        ChatTemplate(NEIGHBOUR_ITEMS),
    ]


def twin(message: dict[str, Any], kind: Any) -> dict[str, Any]:
    """A message ``==`` to ``message`` that may render differently: keys reordered, or a
    tool call's ``index`` as ``1``, ``True`` or ``1.0``."""
    out = dict(reversed(message.items()))
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                **dict(reversed(call.items())),
                "index": kind,
                "function": dict(reversed(call["function"].items())),
            }
            for call in message["tool_calls"]
        ]
    return out


edit = st.one_of(
    st.tuples(
        st.just("append"), st.lists(st.one_of(user, assistant(), tool), min_size=1, max_size=3)
    ),
    st.tuples(st.just("replace"), st.integers(0, 50), st.one_of(user, assistant(), tool)),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("reword"), st.integers(0, 50), st.text(max_size=4)),
    st.tuples(st.just("retype"), st.integers(0, 50)),
    st.tuples(st.just("twin"), st.integers(0, 50), st.permutations([1, True, 1.0, 1])),
    st.tuples(
        st.just("options"),
        st.sampled_from([None, TOOLS]),
        st.sampled_from([None, True, False]),
        st.booleans(),
    ),
)


def apply(sent: list[dict[str, Any]], step: Any) -> list[list[dict[str, Any]]]:
    """The conversations to render after ``step`` (a twin step renders ``==`` versions of a
    message one after the other; ``reword`` changes a message's content, ``retype`` its role
    between user and assistant)."""
    if step[0] == "twin" and sent:
        i = step[1] % len(sent)
        versions = []
        for kind in step[2]:
            sent[i] = twin(sent[i], kind)
            versions.append(list(sent))
        return versions
    if step[0] == "append":
        sent += [pair[0] for pair in step[1]]
    elif step[0] == "replace" and sent:
        sent[step[1] % len(sent)] = step[2][0]
    elif step[0] == "delete" and len(sent) > 1:
        del sent[step[1] % len(sent)]
    elif step[0] == "reword" and sent:
        i = step[1] % len(sent)
        sent[i] = {**sent[i], "content": step[2]}
    elif step[0] == "retype" and sent:  # a user message for an answer, or the other way
        i = step[1] % len(sent)
        flipped = {"user": "assistant", "assistant": "user"}.get(sent[i]["role"], sent[i]["role"])
        sent[i] = {**sent[i], "role": flipped}
    return [sent]


@settings(max_examples=150, deadline=None)
@given(conversation(), st.lists(edit, min_size=1, max_size=8), st.sampled_from([0, 2, 32]))
def test_memo_equals_fresh_render(conv: Any, edits: list[Any], tail_min: int) -> None:
    """(``tail_min``: from how many iterations a stretch renders as one loop.)"""
    with mock.patch.object(replay, "_TAIL_MIN", tail_min):
        check_session(list(conv[0]), edits)


class _Unwalkable(list[Any]):
    """Items that may be sliced but not walked from the start."""

    def __iter__(self) -> Any:
        raise AssertionError("the tail walked the items before its first iteration")


_INNER_LOOPS = (
    "",
    "{% for c in m %}<{{ loop.index0 }}{{ loop.first }}>{% endfor %}",
    # An inner loop's filter and its else block see the outer loop as ``loop``.
    "{% for c in m if loop.index0 % 2 == 0 %}{{ c }}{% endfor %}",
    "{% for c in m if c == 'x' %}{{ c }}{% else %}({{ loop.index }}{{ loop.first }}){% endfor %}",
)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 12), st.integers(0, 12), st.sampled_from(_INNER_LOOPS))
def test_a_tail_renders_its_iterations_without_walking_those_before(
    lo: int, extra: int, inner: str
) -> None:
    """The tail from iteration ``lo`` loops over the items from ``lo`` on (a long
    conversation's tail costs its own iterations, not the whole loop's), and its body reads the
    whole loop's ``index0``/``index``/``first``/``last``/``previtem``/``nextitem``; an inner
    loop's body reads its own, its filter and else block the outer loop's."""
    source = (
        "{% for m in messages %}{{ loop.index0 }}:{{ loop.index }}:{{ loop.first }}:"
        "{{ loop.last }}:{{ loop.previtem }}:{{ loop.nextitem }}:{{ m }}" + inner + ";{% endfor %}"
    )
    plan = ChatTemplate(source)._variant(False).plans[0]
    items = [f"m{t}" for t in range(lo + extra + 1)]
    pieces: list[str] = []
    replay._tail(plan, _Unwalkable(items), lo, {}, pieces, [], [])
    whole = ImmutableSandboxedEnvironment().from_string(source).render(messages=items)
    assert pieces == [piece + ";" for piece in whole.split(";")[lo:-1]]


def check_session(
    sent: list[dict[str, Any]], edits: list[Any], chosen: list[ChatTemplate] | None = None
) -> None:
    """Renders each step's conversation in session "s", interleaved with a second session
    "t" of the same cache that keeps growing the starting conversation (with ``chosen``, or
    every template of ``templates``)."""
    chosen = templates() if chosen is None else chosen
    options: dict[str, Any] = {"tools": None, "thinking": None, "agp": True}
    memos: Slot[RenderMemos] = SessionRegistry(1 << 30).slot("render")
    cache = RenderCache(memos)
    other = list(sent)
    for step in [("options", None, None, True), *edits]:
        if step[0] == "options":
            options = {"tools": step[1], "thinking": step[2], "agp": step[3]}
        kwargs = {} if options["thinking"] is None else {"enable_thinking": options["thinking"]}
        other = [*other, *grown(len(other))]
        renders = [(v, t, "s") for v in apply(sent, step) for t in chosen]
        for version, template, session in [*renders, *((other, t, "t") for t in chosen)]:
            fresh = outcome(
                template,
                version,
                tools=options["tools"],
                chat_template_kwargs=kwargs,
                add_generation_prompt=options["agp"],
            )
            memo = outcome(
                template,
                version,
                tools=options["tools"],
                chat_template_kwargs=kwargs,
                add_generation_prompt=options["agp"],
                cache=cache,
                session=session,
            )
            assert memo == fresh
            kept = [m for s in ("s", "t") for m in (memos.get(s) or {}).values()]
            for run in (run for m in kept for run in m.runs.values()):
                assert run.nbytes == sum(map(sys.getsizeof, run.pieces))  # the size, kept by diff


def grown(n: int) -> list[dict[str, Any]]:
    """What an agent session appends to ``n`` messages: a tool call (with its reasoning every
    other time: gpt-oss refuses both reasoning and content), then its result, or a final
    answer and a new request."""
    answer, follow = agent_call(n, user_turn=n % 3 == 0)
    if n % 2:
        answer = {k: v for k, v in answer.items() if k != "reasoning_content"}
    if follow["role"] == "tool":
        return [answer, follow]
    return [answer, {"role": "assistant", "content": f"done {n}"}, follow]


def outcome(template: ChatTemplate, messages: list[dict[str, Any]], **options: Any) -> str:
    """The rendered text, or the error (a template may fail on some inputs: so must its
    memoized render, with the same message)."""
    try:
        return template.render(messages, **options)
    except TemplateError as exc:
        return f"error: {exc}"


def session_memo(cache: RenderCache, template: ChatTemplate, session: str) -> SessionMemo:
    memos = cache._memos.get(session)
    assert memos is not None
    return memos[f"{id(template)}:default"]


def agent_call(i: int, user_turn: bool) -> list[dict[str, Any]]:
    """The two messages an agent appends per call: an answer, then a tool result or (every
    few calls) a new user request."""
    answer = {
        "role": "assistant",
        "content": f"a{i}",
        "reasoning_content": f"r{i}",
        "tool_calls": [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "run", "arguments": f'{{"n": {i}}}'},
            }
        ],
    }
    follow = (
        {"role": "user", "content": f"u{i}"}
        if user_turn
        else {"role": "tool", "tool_call_id": f"c{i}", "content": f"t{i}"}
    )
    return [answer, follow]


def test_qwen3_plan() -> None:
    variant = qwen3()._variants["default"]
    assert variant.scanned  # the reverse scan runs in Python
    (plan,) = variant.plans  # the main loop replays
    assert plan.thresholds == (Threshold("ns", "last_query_index", "index0", "gt", False),)
    assert plan.indexed == (("messages", (("index0", -1), ("index0", 1))),)
    assert plan.written == ()


def test_qwen3_steady_state_takes_the_fast_path() -> None:
    """Each call reuses every earlier prepared message and replays all earlier iterations
    but the first (it may read ``messages[-1]``) and the last (``loop.last``); a new user
    turn re-renders only the turns whose reasoning it drops."""
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
    ]
    for i in range(40):
        messages = [*messages, *agent_call(i, user_turn=i % 9 == 8)]
        got = qwen3().render(messages, tools=TOOLS, cache=cache, session="x")
        assert got == hf_tokenizer().apply_chat_template(
            messages, tools=TOOLS, tokenize=False, add_generation_prompt=True
        )
        memo = session_memo(cache, qwen3(), "x")
        if i == 0:
            continue
        assert memo.reused == len(messages) - 2
        run = memo.runs[0]
        rendered = len(messages) - run.replayed
        assert rendered == 4 or (i % 9 == 8 and rendered <= 4 + 2 * 9), (i, rendered)
    assert scan(memo.prepared, TemplateNamespace(multi_step_tool=True), False)


def test_an_edit_near_the_start_replays_the_rest() -> None:
    """Claude Code's billing line changes the system message on every call: the iterations
    after it still replay, and only the edited and new messages are prepared again."""
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "u"}]
    for i in range(30):
        system = {"role": "system", "content": f"x-anthropic-billing-header: cch={i:05x};"}
        messages = [*messages, *agent_call(i, user_turn=False)]
        got = qwen3().render([system, *messages], tools=TOOLS, cache=cache, session="b")
        assert got == hf_tokenizer().apply_chat_template(
            [system, *messages], tools=TOOLS, tokenize=False, add_generation_prompt=True
        )
        memo = session_memo(cache, qwen3(), "b")
        if i == 0:
            continue
        assert memo.reused == len(messages) - 2
        assert len(messages) + 1 - memo.runs[0].replayed <= 5, i


def test_scan_matches_the_loop() -> None:
    env = ImmutableSandboxedEnvironment()
    loop = env.from_string(
        "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
        "{%- for message in messages[::-1] %}"
        "{%- set index = (messages|length - 1) - loop.index0 %}"
        '{%- if ns.multi_step_tool and message.role == "user" and not(message.content'
        ".startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}"
        "{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}"
        "{%- endif %}{%- endfor %}{{ ns.multi_step_tool }} {{ ns.last_query_index }}"
    )
    wrapped = {"role": "user", "content": "<tool_response>x</tool_response>"}
    for messages in (
        [{"role": "user", "content": "q"}, {"role": "tool", "content": "t"}],
        [{"role": "user", "content": "q"}, wrapped, {"role": "assistant"}],
        [wrapped, {"role": "assistant", "content": "a"}],
    ):
        ns = TemplateNamespace(multi_step_tool=True, last_query_index=len(messages) - 1)
        assert scan(messages, ns, False)
        assert f"{ns.multi_step_tool} {ns.last_query_index}" == loop.render(messages=messages)
    ns = TemplateNamespace(multi_step_tool=True, last_query_index=0)
    assert not scan([{"role": "user", "content": ["part"]}], ns, False)  # declines...
    assert scan([{"role": "user", "content": ["part"]}], ns, True)  # ... unless `is string`
    assert ns.multi_step_tool is True


def test_unplannable_loops_render_plainly() -> None:
    for source in [
        "{% for m in messages %}{{ strftime_now('%Y') }}{% endfor %}",
        "{% for m in messages %}{{ loop.cycle('a', 'b') }}{% endfor %}",
        "{% for m in messages %}{{ loop.length }}{% endfor %}",
        "{% for m in messages %}{{ loop.revindex }}{% endfor %}",
        "{% for m in messages %}{{ messages|length }}{% endfor %}",
        "{% for m in messages %}{% if loop.first %}{% break %}{% endif %}{% endfor %}",
        # the whole list walked, read by every iteration
        "{% for m in messages %}{{ messages[loop.index:] }}{% endfor %}",
        "{% for i in range(messages|length) %}{{ messages[i] }}{% endfor %}",
        # macros whose effects the memo cannot list (app.rendering.pure_macros)
        "{% set x = tools %}{% macro f(a=x) %}{{ a }}{% endmacro %}{% set x = 1 %}"
        "{% for m in messages %}{{ f() }}{% endfor %}",
        "{% macro f(x) %}{{ strftime_now('%Y') }}{% endmacro %}"
        "{% for m in messages %}{{ f(m) }}{% endfor %}",
        "{% set ns = namespace(a=0) %}{% macro f(n) %}{% set n.a = 1 %}{% endmacro %}"
        "{% for m in messages %}{{ f(ns) }}{% endfor %}",
        "{% macro f(x) %}{% if x is none %}{{ caller() }}{% endif %}{% endmacro %}"
        "{% for m in messages %}{{ f(m) }}{% endfor %}",
        "{% macro f(x) %}{{ varargs }}{% endmacro %}{% for m in messages %}{{ f(m) }}{% endfor %}",
        "{% macro f(x) %}{{ loop is defined }}{% endmacro %}"
        "{% for m in messages %}{{ f(m) }}{% endfor %}",
        "{% macro f(x) %}{{ x }}{% endmacro %}{% macro f(x) %}{{ x }}!{% endmacro %}"
        "{% for m in messages %}{{ f(m) }}{% endfor %}",
        "{% if 1 %}{% macro f(x) %}{{ x }}{% endmacro %}{% endif %}"
        "{% for m in messages %}{{ f(m) }}{% endfor %}",
        "{% macro f(x) %}{{ x }}{% endmacro %}{% macro g(x) %}{{ h(x) }}{% endmacro %}"
        "{% macro h(x) %}{{ strftime_now('%Y') }}{% endmacro %}"
        "{% for m in messages %}{{ f(m) }}{{ g(m) }}{% endfor %}",
        "{% for m in messages if m.role %}{{ m }}{% endfor %}",
        "{% for m in messages %}{{ m }}{% else %}none{% endfor %}",
        "{% for m in messages %}{{ loop }}{% endfor %}",
    ]:
        template = ChatTemplate(source)
        assert template._variants["default"].plans == [], source
        cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
        messages = [{"role": "user", "content": "x"}]
        assert template.render(messages, cache=cache, session="s") == template.render(messages)


def test_aliased_namespace_is_never_replayed() -> None:
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    template = ChatTemplate(ALIASED)
    messages: list[dict[str, Any]] = []
    for i in range(5):
        messages = [*messages, {"role": "user", "content": str(i)}]
        assert template.render(messages, cache=cache, session="s") == template.render(messages)
    assert session_memo(cache, template, "s").runs == {}


def test_memo_is_bounded_and_thread_safe() -> None:
    sessions = SessionRegistry(200_000)
    cache = RenderCache(sessions.slot("render"))
    errors: list[BaseException] = []

    def session(k: int) -> None:
        try:
            template = qwen3() if k % 2 else ChatTemplate(SMOLLM2_CHATML)
            messages: list[dict[str, Any]] = [{"role": "user", "content": f"{k}"}]
            for i in range(30):
                messages = [*messages, *agent_call(i, user_turn=i % 5 == 4)]
                messages[-1] = {**messages[-1], "content": "x" * 300}
                got = template.render(messages, tools=TOOLS, cache=cache, session=str(k % 6))
                assert got == template.render(messages, tools=TOOLS)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert 0 < sessions.stats()["bytes"] <= 200_000


def test_in_place_edits_between_calls_are_seen() -> None:
    """The memo compares against its own copies and trusts identity only for the messages
    it prepared, so a caller that edits its objects in place between calls is served
    exactly."""
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    tools = [{"type": "function", "function": {"name": "run", "parameters": {}}}]
    listing = ChatTemplate("{% for t in tools %}{{ t.function.name }};{% endfor %}")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "u"}, *agent_call(0, False)]
    for template in (qwen3(), listing):
        for step in range(3):
            got = template.render(messages, tools=tools, cache=cache, session="s")
            assert got == template.render(messages, tools=tools)
            messages[-1]["content"] += "!"
            messages[1]["tool_calls"][0]["function"]["arguments"] = f'{{"n": {step}}}'
            tools[0]["function"]["name"] += "x"


def test_frozen_inputs_reuse_by_identity_and_stay_exact() -> None:
    """The proxy's case: each call's messages are the previous call's objects plus new ones
    (agent_sessions shares them the same way), sometimes with one replaced (billing line)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from loadtest.agent_sessions import chat_requests

    config = assets.default_dir() / "qwen3/tokenizer_config.json"
    template = ChatTemplate.from_tokenizer_config(config)
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    for body in chat_requests(5, target_chars=60_000, billing_line=True, model="q"):
        fresh = template.render(body["messages"], tools=body["tools"])
        memo = template.render(
            body["messages"], tools=body["tools"], cache=cache, session="s", frozen=True
        )
        assert memo == fresh
