"""The session memo of the Anthropic -> chat translation (``ChatTranslator``) is exact: over
generated sessions that grow, resend bodies parsed afresh, edit or extend earlier messages
(the last one too: tool results merged into it), change the billing line, ``strip`` and tools
between calls, its chat body equals a fresh ``to_chat_body`` (``==`` and the same JSON); the
chat messages of the unchanged prefix are the previous call's objects (``is``), also when the
system message before them was replaced; nothing it is given or gave is mutated; and the
``validated`` count covers exactly the previous call's objects (and the system message)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import BadRequestError
from app.protocol.anthropic_reply import MessageStream, message_from_completion
from app.protocol.anthropic_request import ChatTranslator, Translated, to_chat_body
from app.protocol.incremental_json import BodyParser
from app.protocol.openai_chat import parse_chat_request
from app.sessions.registry import SessionRegistry

TEXT = st.text(alphabet="ab \n{}\"é", max_size=6)
IDS = st.sampled_from(["toolu_1", "toolu_2", "toolu_3"])


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


TOOL_RESULT = st.builds(
    lambda ident, content, error: {"type": "tool_result", "tool_use_id": ident,
                                   "content": content, **({"is_error": True} if error else {})},
    IDS,
    st.one_of(st.none(), TEXT, st.lists(TEXT.map(text_block), max_size=2)),
    st.booleans(),
)
USER = st.builds(
    lambda content: {"role": "user", "content": content},
    st.one_of(TEXT, st.lists(st.one_of(TEXT.map(text_block), TOOL_RESULT), max_size=4)),
)
ASSISTANT_BLOCK = st.one_of(
    TEXT.map(text_block),
    TEXT.map(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}),
    st.just({"type": "redacted_thinking", "data": "opaque"}),
    st.builds(lambda ident, arg: {"type": "tool_use", "id": ident, "name": "Bash",
                                  "input": {"command": arg}}, IDS, TEXT),
)
ASSISTANT = st.builds(
    lambda content: {"role": "assistant", "content": content},
    st.one_of(TEXT, st.lists(ASSISTANT_BLOCK, max_size=4)),
)
MESSAGE = st.one_of(USER, ASSISTANT)
TOOLS = [{"name": "Bash", "description": "Run.", "input_schema": {"type": "object"}}]


@st.composite
def system(draw: st.DrawFn) -> Any:
    """Claude Code's system (billing line, its ``cch`` new on most calls) or another."""
    cch = draw(st.sampled_from(["00001", "00002", "00003"]))
    billing = f"x-anthropic-billing-header: cc_version=2.1; cch={cch};"
    return draw(st.sampled_from([
        None, "", [], "Be brief.", billing + "\nBe brief.", billing,
        [text_block(billing + "\nYou are Claude Code."), text_block("Use tools.")],
        [text_block(billing), text_block("Use tools.")],
        [text_block("You are Claude Code.")],
    ]))


# Each step makes the next call's messages from the previous call's (the same objects where
# kept, as the body parser keeps them).
STEPS = st.one_of(
    st.tuples(st.just("append"), st.lists(MESSAGE, min_size=1, max_size=3)),
    st.tuples(st.just("fresh"), st.lists(MESSAGE, max_size=2)),  # parsed afresh, then append
    st.tuples(st.just("edit"), st.tuples(st.integers(0, 50), MESSAGE)),  # a new object in its place
    st.tuples(st.just("extend_last"), st.lists(TOOL_RESULT, min_size=1, max_size=2)),
    st.tuples(st.just("truncate"), st.integers(1, 50)),
    st.tuples(st.just("same"), st.just(None)),  # the same messages resent (a retry)
)


def next_messages(messages: list[Any], step: tuple[str, Any]) -> list[Any]:
    kind, arg = step
    if kind == "append":
        return [*messages, *arg]
    if kind == "fresh":
        return [*orjson.loads(orjson.dumps(messages)), *arg]
    if kind == "edit":
        index, message = arg
        out = list(messages)
        out[index % len(out)] = message
        return out
    if kind == "extend_last":
        last = messages[-1]
        if last["role"] != "user":
            return [*messages, {"role": "user", "content": list(arg)}]
        blocks = last["content"] if isinstance(last["content"], list) else [
            text_block(last["content"])]
        merged = {"role": "user", "content": [*blocks, *arg]}  # tool results merged in
        return [*messages[:-1], merged]
    if kind == "truncate":
        return messages[: max(1, len(messages) - arg % len(messages))]
    return list(messages)


def body_of(messages: list[Any], system_value: Any, tools: bool, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "max_tokens": 8, "messages": messages,
                            "stream": stream, "temperature": 0.0}
    if system_value is not None:
        body["system"] = copy.deepcopy(system_value)
    if tools:
        body["tools"] = copy.deepcopy(TOOLS)
        body["tool_choice"] = {"type": "auto"}
    return body


def chat_of(translated: Translated) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = translated.body["messages"]
    return messages


def identical_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] is b[n]:
        n += 1
    return n


def check_call(translator: ChatTranslator, body: dict[str, Any], strip: bool,
               previous: tuple[dict[str, Any], Translated, bytes] | None) -> Translated:
    before = orjson.dumps(body)
    got = translator.translate(body, "session", strip_billing_line=strip)
    fresh = to_chat_body(orjson.loads(before), strip_billing_line=strip)
    assert got.body == fresh.body
    assert orjson.dumps(got.body) == orjson.dumps(fresh.body)
    assert orjson.dumps(body) == before, "the body was mutated"
    chat = chat_of(got)
    has_system = bool(chat) and chat[0]["role"] == "system"
    offset = int(has_system)
    n_made = [len(to_chat_body(body_of([m], None, False, False)).body["messages"])
              for m in body["messages"]]
    if previous is None:
        assert got.validated == 0
    else:
        old_body, old, old_json = previous
        assert orjson.dumps(old.body) == old_json, "the previous chat body was mutated"
        old_chat = chat_of(old)
        old_offset = int(old_chat[0]["role"] == "system")
        k = identical_prefix(body["messages"], old_body["messages"])
        n = sum(n_made[:k])
        # the chat messages of the unchanged prefix are the previous call's objects
        assert all(a is b for a, b in zip(chat[offset : offset + n],
                                          old_chat[old_offset : old_offset + n], strict=True))
        # ... and no more: the first message after it is translated afresh
        if offset + n < len(chat) and old_offset + n < len(old_chat):
            assert chat[offset + n] is not old_chat[old_offset + n]
        if has_system and old_offset:
            same_text = chat[0]["content"] == old_chat[0]["content"]
            assert (chat[0] is old_chat[0]) == same_text
        assert got.validated == (offset + n if k else 0)
        # what is validated is the previous call's objects, and the system message
        previous_ids = {id(m) for m in old_chat}
        assert all(id(m) in previous_ids for m in chat[offset : got.validated])
    parse_chat_request(got.body, validated=got.validated)
    return got


@settings(max_examples=300, deadline=None)
@given(
    first=st.lists(MESSAGE, min_size=1, max_size=4),
    calls=st.lists(st.tuples(STEPS, system(), st.booleans(), st.booleans(), st.booleans()),
                   max_size=8),
    strip=st.booleans(),
)
def test_memoized_translation_equals_fresh(
    first: list[Any], calls: list[tuple[tuple[str, Any], Any, bool, bool, bool]], strip: bool
) -> None:
    translator = ChatTranslator(SessionRegistry(1 << 24).slot("turns"))
    messages = first
    body = body_of(messages, None, False, False)
    got = check_call(translator, body, strip, None)
    previous = (body, got, orjson.dumps(got.body))
    for step, system_value, strip_now, tools, stream in calls:
        messages = next_messages(messages, step)
        body = body_of(messages, system_value, tools, stream)
        got = check_call(translator, body, strip_now, previous)
        previous = (body, got, orjson.dumps(got.body))


def test_billing_line_replaces_only_the_system_message() -> None:
    """Claude Code's billing line changes every call: with ``strip_billing_line`` off the
    system message is new, every chat message after it the previous call's object; with it
    on, the system message too."""
    billing = "x-anthropic-billing-header: cc_version=2.1; cch={};\nYou are Claude Code."
    messages: list[Any] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Running."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"},
            {"type": "text", "text": "go on"}]},
    ]
    for strip in (False, True):
        translator = ChatTranslator(SessionRegistry(1 << 20).slot("turns"))
        body = body_of(messages, [text_block(billing.format(1))], True, True)
        old = chat_of(translator.translate(body, "s", strip_billing_line=strip))
        assert len(old) == 5  # system, user, assistant, tool, user
        grown = [*messages, {"role": "assistant", "content": "ok"},
                 {"role": "user", "content": "more"}]
        body = body_of(grown, [text_block(billing.format(2))], True, True)
        got = translator.translate(body, "s", strip_billing_line=strip)
        new = chat_of(got)
        assert got.body == to_chat_body(body, strip_billing_line=strip).body
        assert (new[0] is old[0]) == strip
        assert all(a is b for a, b in zip(new[1:5], old[1:], strict=True))
        assert got.validated == 5


@pytest.mark.parametrize("billing_changes", [False, True])
def test_through_the_body_parser(billing_changes: bool) -> None:
    """With the real ``BodyParser``: appends keep the objects (and the billing line, when the
    parser survives its edit), the old chat messages are reused, and whatever the parser
    reports, the translation equals a fresh one."""
    sessions = SessionRegistry(1 << 20)
    parser, translator = BodyParser(sessions.slot("body")), ChatTranslator(sessions.slot("turns"))
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    old: list[dict[str, Any]] | None = None
    reuses = 0
    for k in range(6):
        messages = [*messages, {"role": "assistant", "content": f"a{k}"},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "t", "content": f"r{k}"}]}]
        cch = k if billing_changes else 0
        body = body_of(messages, f"x-anthropic-billing-header: cch={cch};\nsys", False, False)
        parsed = parser.parse(orjson.dumps(body), "s")
        parsed.valid()  # as the route does once the body passed validation
        got = translator.translate(parsed.body, "s", strip_billing_line=False)
        assert got.body == to_chat_body(body).body
        new = chat_of(got)
        if old is not None and parsed.reused_messages:
            reuses += 1
            assert (new[0] is old[0]) == (not billing_changes)
            assert all(a is b for a, b in zip(new[1 : len(old)], old[1:], strict=True))
            assert got.validated == len(old)
        old = new
    assert reuses == 5, reuses  # the parser survives the billing line edit too


def test_a_bad_message_leaves_the_memo_as_it_was() -> None:
    translator = ChatTranslator(SessionRegistry(1 << 20).slot("turns"))
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    first = chat_of(translator.translate(body_of(messages, None, False, False), "s"))
    bad = [*messages, {"role": "robot", "content": "x"}]
    with pytest.raises(BadRequestError, match=r"messages\.1\.role"):
        translator.translate(body_of(bad, None, False, False), "s")
    again = chat_of(translator.translate(body_of([*messages, {"role": "assistant",
                                                              "content": "ok"}], None,
                                                 False, False), "s"))
    assert again[0] is first[0]


def test_sessions_are_apart_and_the_memo_is_bounded() -> None:
    translator = ChatTranslator(SessionRegistry(4096).slot("turns"))
    shared: list[Any] = [{"role": "user", "content": "x" * 100}]
    a = chat_of(translator.translate(body_of(shared, None, False, False), "a"))
    b = chat_of(translator.translate(body_of(shared, None, False, False), "b"))
    assert a[0] is not b[0]  # each session its own translation
    big: list[Any] = [{"role": "user", "content": "y" * 10_000}]
    translator.translate(body_of(big, None, False, False), "big")  # over the budget: not kept
    again = chat_of(translator.translate(body_of([*big, {"role": "assistant",
                                                         "content": "ok"}], None, False,
                                                 False), "big"))
    assert again == chat_of(translator.translate(body_of(
        [*big, {"role": "assistant", "content": "ok"}], None, False, False), "fresh"))


@pytest.mark.parametrize(
    ("finish", "stop_reason", "expected"),
    [
        ("stop", "END", ("stop_sequence", "END")),
        ("stop", None, ("end_turn", None)),
        ("stop", 151645, ("end_turn", None)),  # a stop token id, not a sequence
        ("length", None, ("max_tokens", None)),
        ("tool_calls", None, ("tool_use", None)),
    ],
)
def test_stop_reason_and_sequence_in_both_reply_forms(
    finish: str, stop_reason: Any, expected: tuple[str, str | None]
) -> None:
    choice = {"index": 0, "message": {"role": "assistant", "content": "hi"},
              "finish_reason": finish, "stop_reason": stop_reason}
    reply = {"id": "c", "choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    message = message_from_completion(reply, model="m", n_ids=3)
    assert (message["stop_reason"], message["stop_sequence"]) == expected
    stream = MessageStream(model="m", n_ids=3)
    stream.start()
    stream.feed({"choices": [{"index": 0, "delta": {"content": "hi"}}]})
    stream.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": finish,
                              "stop_reason": stop_reason}]})
    events = [line for line in stream.finish().split(b"\n") if line.startswith(b"data: ")]
    delta = orjson.loads(events[-2][len(b"data: "):])["delta"]
    assert (delta["stop_reason"], delta["stop_sequence"]) == expected
