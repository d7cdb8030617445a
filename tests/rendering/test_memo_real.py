"""The render memo is exact on every pinned real template (those whose loops call macros:
Qwen3-Coder, Qwen3.5, GLM-4.7, gpt-oss, MiniMax M2, Gemma 4, among them): a memoized render
equals a fresh one over generated agent sessions (tools, tool calls and results, reasoning,
several turns, edits, option changes), and a memo that ignores what gpt-oss's and Gemma 4's
per-turn scans read fails them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from app.rendering import ChatTemplate, RenderCache, replay, windows
from app.rendering.loops import Threshold
from app.sessions.registry import SessionRegistry
from app.tools import assets, model_pins
from tests.rendering.strategies import TOOLS, conversation
from tests.rendering.test_memo import agent_call, check_session, edit, outcome, session_memo

MACRO_TEMPLATES = [
    "Qwen3-Coder",
    "Qwen3.5-4B",
    "GLM-4.7-Flash",
    "openai-gpt-oss-120b",
    "MiniMax-M2",
    "google-gemma-4-31B-it",
]


@functools.cache
def real(stem: str) -> ChatTemplate:
    path = assets.templates(assets.default_dir()).get(stem)
    if path is None or not Path(path).exists():
        pytest.skip(f"template {stem} is not in the asset cache")
    return ChatTemplate.from_jinja_file(
        path, special_tokens={"bos_token": "<s>", "eos_token": "</s>"}
    )


@pytest.mark.parametrize("stem", sorted(model_pins.TEMPLATES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conv=conversation(),
    edits=st.lists(edit, min_size=1, max_size=6),
    tail_min=st.sampled_from([0, 2, 32]),
)
def test_memo_equals_fresh_render_on_real_templates(
    stem: str, conv: Any, edits: list[Any], tail_min: int
) -> None:
    with mock.patch.object(replay, "_TAIL_MIN", tail_min):
        check_session(list(conv[0]), edits, [real(stem)])


@pytest.mark.parametrize("stem", MACRO_TEMPLATES)
def test_an_agent_session_replays_on_real_templates(stem: str) -> None:
    """A growing agent session: every call equals a fresh render, and a call after a tool
    result replays all but a few iterations of the main loop."""
    template = real(stem)
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
    ]
    for i in range(12):
        answer, follow = agent_call(i, user_turn=i % 5 == 4)
        messages = [*messages, {**answer, "content": ""}, follow]  # gpt-oss: not both
        got = template.render(messages, tools=TOOLS, cache=cache, session="x")
        assert got == template.render(messages, tools=TOOLS)
    main = max(session_memo(cache, template, "x").runs.values(), key=lambda run: len(run.items))
    assert main.replayed >= len(main.items) - 4


@pytest.mark.parametrize("stem", MACRO_TEMPLATES)
@pytest.mark.parametrize("edited", [3, 4])
def test_a_neighbour_edited_rerenders_the_tool_result(stem: str, edited: int) -> None:
    """Qwen3-Coder's and Qwen3.5's tool results read ``loop.previtem`` and ``loop.nextitem``
    (they open and close one user turn around consecutive results): replacing the result
    before or after an unchanged one changes how that one renders."""
    template = real(stem)
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    answer, _ = agent_call(0, user_turn=False)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {**answer, "content": ""},
        {"role": "tool", "tool_call_id": "c0", "content": "first"},
        {"role": "tool", "tool_call_id": "c0", "content": "second"},
        {"role": "user", "content": "v"},
    ]
    for version in (
        messages,
        [*messages[:edited], {"role": "user", "content": "w"}, *messages[edited + 1 :]],
    ):
        memo = outcome(template, version, tools=TOOLS, cache=cache, session="x")
        assert memo == outcome(template, version, tools=TOOLS)


def test_the_per_turn_scans_are_memo_inputs() -> None:
    """gpt-oss's "a final answer comes later" is a threshold of its main loop; Gemma 4's scans
    back to the previous turn and forward over a turn's tool results are windows of it."""
    (gpt_oss,) = real("openai-gpt-oss-120b")._variant(True).plans
    assert gpt_oss.thresholds == (Threshold("__toksplice_after_0", "index", "index0", "lt", False),)
    assert gpt_oss.windows == ()
    (gemma,) = real("google-gemma-4-31B-it")._variant(True).plans
    assert gemma.windows == (
        (windows.PREVIOUS_TURN, "loop_messages"),
        (windows.TOOL_RUN, "loop_messages"),
    )
    assert gemma.thresholds == (Threshold("ns_turn", "last_user_idx", "index0", "gt", False),)


def _call(i: int, content: str = "") -> dict[str, Any]:
    answer, _ = agent_call(i, user_turn=False)
    return {**answer, "content": content, "reasoning_content": None}


def _result(i: int, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": text}


_U: dict[str, Any] = {"role": "user", "content": "u"}
# (template, the conversation's versions, one call after another, each re-rendered from the
# memo of the ones before): what each scan reads changes while the turn reading it does not.
_SCENARIOS: dict[str, tuple[str, list[list[dict[str, Any]]]]] = {
    # a turn's tool results are rendered in its iteration: one replaced
    "tool_run": (
        "google-gemma-4-31B-it",
        [[_U, _call(0), _result(0, "first"), _U], [_U, _call(0), _result(0, "second"), _U]],
    ),
    # a model turn right after another model turn does not open a new turn: the first replaced
    "previous_turn": (
        "google-gemma-4-31B-it",
        [
            [_U, {"role": "assistant", "content": "a"}, _result(0, "t"), _call(1), _U],
            [_U, _U, _result(0, "t"), _call(1), _U],
        ],
    ),
    # a tool call's analysis is dropped once a final answer follows it
    "later_final": (
        "openai-gpt-oss-120b",
        [
            [_U, _call(0, "why"), _result(0, "t"), _U],
            [_U, _call(0, "why"), _result(0, "t"), _U, {"role": "assistant", "content": "f"}, _U],
        ],
    ),
}


def _wrong(scan: str) -> Any:
    """A memo that ignores what ``scan`` reads."""
    if scan == "later_final":
        return mock.patch.object(replay, "_flips", lambda *_: [])
    if scan == "tool_run":
        nothing = (windows.TOOL_RUN, lambda _, n: [(t + 1, t + 1) for t in range(n)])
    else:
        nothing = (windows.PREVIOUS_TURN, lambda _, n: [(t, t) for t in range(n)])
    return mock.patch.object(replay, "SPANS", {**windows.SPANS, nothing[0]: nothing[1]})


def _session_matches(stem: str, versions: list[list[dict[str, Any]]]) -> bool:
    template = real(stem)
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    return all(
        template.render(v, tools=TOOLS, cache=cache, session="s") == template.render(v, tools=TOOLS)
        for v in versions
    )


@pytest.mark.parametrize("scan", sorted(_SCENARIOS))
def test_a_memo_that_ignores_a_scan_fails(scan: str) -> None:
    stem, versions = _SCENARIOS[scan]
    assert _session_matches(stem, versions)
    with _wrong(scan):
        assert not _session_matches(stem, versions)


_word = st.sampled_from(["", "a", "b"])
# An agent conversation's turns: a request, a final answer, a tool call and its results.
_turn = st.one_of(
    _word.map(lambda c: [{"role": "user", "content": c}]),
    _word.map(lambda c: [{"role": "assistant", "content": c}]),
    st.builds(
        lambda c, results: [_call(0, c), *(_result(0, r) for r in results)],
        _word,
        st.lists(_word, max_size=3),
    ),
)
_turns = st.lists(_turn, min_size=1, max_size=6).map(lambda ts: [m for t in ts for m in t])
# A change to message ``i``: its content, its role (user and assistant swapped), gone, or a
# turn inserted before it.
_change = st.tuples(
    st.sampled_from(["reword", "retype", "delete", "insert"]), st.integers(0, 30), _word, _turn
)


def _changed(messages: list[dict[str, Any]], change: Any) -> list[dict[str, Any]]:
    kind, i, word, turn = change
    i %= len(messages) + (kind == "insert")
    out = list(messages)
    if kind == "insert":
        out[i:i] = turn
    elif kind == "delete" and len(out) > 1:
        del out[i]
    elif kind == "reword":
        out[i] = {**out[i], "content": out[i]["content"] + word + "!"}
    elif kind == "retype" and out[i]["role"] != "tool":
        out[i] = {**out[i], "role": "user" if out[i]["role"] == "assistant" else "assistant"}
    return out


def _check_turns(stem: str, start: list[dict[str, Any]], changes: list[Any]) -> None:
    """Each change, and a turn appended after it, rendered from the memo equals a fresh
    render."""
    versions = [start]
    for change in changes:
        versions.append(_changed(versions[-1], change))
        versions.append([*versions[-1], *change[3]])
    template = real(stem)
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    for version in versions:
        got = outcome(template, version, tools=TOOLS, cache=cache, session="s")
        assert got == outcome(template, version, tools=TOOLS)


@pytest.mark.parametrize("stem", MACRO_TEMPLATES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=_turns, changes=st.lists(_change, min_size=1, max_size=4))
def test_memo_equals_fresh_render_as_turns_change(
    stem: str, start: list[dict[str, Any]], changes: list[Any]
) -> None:
    """Turns edited, retyped, removed or inserted anywhere, and new ones appended: what the
    per-turn scans of gpt-oss and Gemma 4 read changes while the turns reading it do not."""
    _check_turns(stem, start, changes)


@pytest.mark.parametrize("scan", sorted(_SCENARIOS))
def test_the_generated_turns_catch_a_memo_that_ignores_a_scan(scan: str) -> None:
    """The property test above finds each of those wrong memos on its own."""
    stem, _ = _SCENARIOS[scan]

    @settings(
        max_examples=300,
        deadline=None,
        phases=[Phase.generate],
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(start=_turns, changes=st.lists(_change, min_size=1, max_size=4))
    def probe(start: list[dict[str, Any]], changes: list[Any]) -> None:
        with _wrong(scan):
            _check_turns(stem, start, changes)

    with pytest.raises(AssertionError):
        probe()


def test_messages_a_rewrite_is_not_proven_on_render_without_the_memo() -> None:
    with pytest.raises(windows.Unprovable):
        windows.tool_run([{"role": "user"}, {"content": "no role"}], 0)
    with pytest.raises(windows.Unprovable):
        windows.last_final(({"role": "user"},))
    template = real("google-gemma-4-31B-it")
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    messages = [_U, _call(0), _result(0, "t"), _U]
    unprovable = windows.Unprovable("test")
    with (
        mock.patch.object(windows, "_roles", side_effect=unprovable),
        mock.patch.object(windows, "_role", side_effect=unprovable),
    ):
        got = template.render(messages, tools=TOOLS, cache=cache, session="s")
    assert got == template.render(messages, tools=TOOLS)
    assert session_memo(cache, template, "s").runs == {}


_TOOL_SCAN = (
    "{%- set loop_messages = messages -%}{%- for message in loop_messages -%}{{ message.role }}"
    "{%- set ns_tool_scan = namespace(stopped=false) -%}"
    "{%- for k in range(loop.index0 + 1, loop_messages | length) -%}"
    "{%- if ns_tool_scan.stopped -%}"
    "{%- elif loop_messages[k]['role'] != 'tool' -%}{%- set ns_tool_scan.stopped = true -%}"
    "{%- else -%}{%- set follow = loop_messages[k] -%}({{ follow.content }}REST)"
    "{%- endif -%}{%- endfor -%}AFTER;{%- endfor -%}"
)


@pytest.mark.parametrize(
    ("rest", "after"),
    [
        ("{{ loop.index }}", ""),  # the scan's own loop
        ("{{ k }}", ""),
        ("{% set ns_tool_scan.stopped = true %}", ""),  # ends the scan early
        ("", "{{ ns_tool_scan.stopped }}"),  # its outcome read after it
        ("", "{% set loop_messages = [] %}"),  # the scanned list rebound
    ],
)
def test_a_scan_is_rewritten_only_where_its_rewrite_is_exact(rest: str, after: str) -> None:
    messages = [_U, _call(0), _result(0, "a"), _result(0, "b"), _U, _call(1), _result(1, "c")]
    exact = ChatTemplate(_TOOL_SCAN.replace("REST", "").replace("AFTER", ""))
    assert exact._variant(False).plans[0].windows == ((windows.TOOL_RUN, "loop_messages"),)
    template = ChatTemplate(_TOOL_SCAN.replace("REST", rest).replace("AFTER", after))
    assert template._variant(False).plans == []
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    for n in (5, 7):
        for chosen in (exact, template):
            got = chosen.render(messages[:n], cache=cache, session="s")
            assert got == chosen.render(messages[:n])
