"""BodyParser: every parse equals orjson.loads of the whole body, whatever it reused."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, ClassVar

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from app.protocol.incremental_json import BodyParser, array_span
from app.sessions.registry import SessionRegistry

strings = st.text(max_size=20) | st.sampled_from(['"', "\\", '\\"', "]", "[", "},{", '"]'])
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | strings,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
    max_leaves=8,
)
messages = st.fixed_dictionaries({"role": st.sampled_from(["user", "tool"]), "content": values})
dumps = st.sampled_from(
    [
        lambda v: orjson.dumps(v),
        lambda v: json.dumps(v).encode(),
        lambda v: json.dumps(v, ensure_ascii=False).encode(),
        lambda v: json.dumps(v, indent=1).encode(),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(messages, min_size=1, max_size=3), min_size=1, max_size=5),
    st.dictionaries(strings, values, max_size=3),
    dumps,
    st.booleans(),
    st.lists(st.text("ab", min_size=4, max_size=4) | strings, min_size=5, max_size=5),
)
def test_growing_bodies_parse_exactly(
    turns: list[list[dict[str, Any]]],
    extra: dict[str, Any],
    dump: Any,
    messages_last: bool,
    systems: list[str],
) -> None:
    """Messages appended call by call, and a field outside the array edited (Claude Code's
    billing line) on some calls."""
    parser = BodyParser(SessionRegistry(1 << 24).slot("body"))
    history: list[dict[str, Any]] = []
    for k, turn in enumerate(turns):
        history = history + turn
        fields = {k: v for k, v in extra.items() if k != "messages"}
        fields["system"] = systems[k]
        body = {**fields, "messages": history} if messages_last else {"messages": history, **fields}
        data = dump(body)
        parsed = parser.parse(data, "t/s")
        assert parsed.body == orjson.loads(data)
        assert json.dumps(parsed.body, sort_keys=True) == json.dumps(
            orjson.loads(data), sort_keys=True
        )
        assert 0 <= parsed.reused_messages < len(history) or not turn


def test_appends_reuse_the_previous_messages() -> None:
    parser = BodyParser(SessionRegistry(1 << 20).slot("body"))
    history = [{"role": "user", "content": 'a]\\"}, {'}]
    first = parser.parse(json.dumps({"model": "m", "messages": history, "x": [1]}).encode(), "k")
    first.valid()
    history = [*history, {"role": "tool", "content": "b"}]
    second = parser.parse(json.dumps({"model": "m", "messages": history, "x": [1]}).encode(), "k")
    assert second.reused_messages == 1
    second.valid()
    assert second.body["messages"][0] is first.body["messages"][0]
    other_data = json.dumps({"model": "n", "messages": history}).encode()
    other = parser.parse(other_data, "k")  # only fields outside the array changed
    assert other.reused_messages == 2 and other.body == orjson.loads(other_data)
    assert other.body["messages"][1] is second.body["messages"][1]


def test_insertion_that_escapes_the_array_is_not_trusted() -> None:
    parser = BodyParser(SessionRegistry(1 << 20).slot("body"))
    parser.parse(b'{"messages":[{"role":"user"}],"model":"a"}', "k")
    sneaky = b'{"messages":[{"role":"user"},1],"model":"b","m":[2],"model":"a"}'
    parsed = parser.parse(sneaky, "k")
    assert parsed.body == orjson.loads(sneaky) and parsed.reused_messages == 0


def test_array_span_finds_the_top_level_array() -> None:
    data = b'{"a": {"messages": [1]}, "s": "\\"messages\\": [", "messages" : [ [], {"]": 1} ] }'
    span = array_span(data)
    assert span is not None
    start, close = span
    assert data[start : start + 4] == b"[ []" and data[close:] == b"] }"
    assert array_span(b'{"messages": "x"}') is None
    assert array_span(b"[1, 2]") is None


def test_billing_line_edits_keep_the_messages() -> None:
    """Claude Code: ``system`` changes every call (before or after ``messages``)."""
    for system_first in (True, False):
        parser = BodyParser(SessionRegistry(1 << 20).slot("body"))
        history: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
        for call in range(4):
            system = f"x-anthropic-billing-header: cc_version=2.1; cch={call * 7919:05d};\nbe nice"
            body = (
                {"system": system, "messages": history, "max_tokens": 9}
                if system_first
                else {"messages": history, "system": system, "max_tokens": 9}
            )
            data = json.dumps(body).encode()
            parsed = parser.parse(data, "k")
            parsed.valid()
            assert parsed.body == orjson.loads(data)
            assert parsed.reused_messages == (len(history) - 1 if call else 0)
            history = [*history, {"role": "assistant", "content": f"ok {call}"}]


def test_items_of_a_rejected_body_are_checked_again() -> None:
    """Reused items count as validated only once their body passed validation."""
    parser = BodyParser(SessionRegistry(1 << 20).slot("body"))
    history: list[dict[str, Any]] = [{"role": "wizard", "content": "x"}]
    parser.parse(orjson.dumps({"messages": history}), "k")  # refused: never marked valid
    history = [*history, {"role": "user", "content": "hi"}]
    second = parser.parse(orjson.dumps({"messages": history}), "k")
    assert second.reused_messages == 0
    assert second.body == {"messages": history}
    second.valid()
    third = parser.parse(orjson.dumps({"messages": [*history, {"role": "user"}]}), "k")
    assert third.reused_messages == 2


def test_extend_parses_only_what_lies_outside_the_reused_array() -> None:
    """A small continuation of a large body is an extension within the bound (the event loop
    parses it: ``app.api.body``); one that adds more than the bound, or that is no extension,
    is not (a worker thread parses it whole)."""
    parser = BodyParser(SessionRegistry(1 << 26).slot("body"))
    history = [{"role": "user", "content": "x" * 1000} for _ in range(400)]
    first = orjson.dumps({"model": "m", "messages": history})
    parser.parse(first, "s")
    small = orjson.dumps({"model": "m", "messages": [*history, {"role": "user", "content": "y"}]})
    extended = parser.extend(small, "s", 4096)
    assert extended is not None and extended.body == orjson.loads(small)
    assert extended.new_bytes == len(small) - len(first)
    big = orjson.dumps(
        {"model": "m", "messages": [*history, {"role": "user", "content": "z" * 9000}]}
    )
    assert parser.extend(big, "s", 4096) is None
    assert parser.parse(big, "s").body == orjson.loads(big)
    edited = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "e"}, *history]})
    assert parser.extend(edited, "s", 1 << 20) is None
    assert parser.extend(small, "other", 1 << 20) is None


def test_a_small_continuation_of_a_large_body_is_parsed_without_a_thread_hop(
    monkeypatch: Any,
) -> None:
    """``json_body`` sends a body over ``INLINE_PARSE_BYTES`` to a worker thread only when it
    is not a small extension of the session's previous body: the hop cost more than the
    parse of a 1M-character continuation (0.4 ms) on a loaded machine."""
    import asyncio

    import anyio.to_thread

    from app.api import body as body_module

    hops: list[int] = []
    real = anyio.to_thread.run_sync

    async def counted(func: Any, *args: Any) -> Any:
        hops.append(len(args[0]))
        return await real(func, *args)

    monkeypatch.setattr(body_module.anyio.to_thread, "run_sync", counted)
    parser = BodyParser(SessionRegistry(1 << 26).slot("body"))
    history = [{"role": "user", "content": "x" * 1000} for _ in range(400)]

    class _Request:
        """What ``json_body`` reads of a Starlette request."""

        headers: ClassVar[dict[str, str]] = {}
        app = SimpleNamespace(state=SimpleNamespace(settings=SimpleNamespace(client_timeout=60)))

        def __init__(self, data: bytes) -> None:
            self._data = data

        async def stream(self) -> Any:
            yield self._data

    async def parse(data: bytes) -> Any:
        got = await body_module.json_body(_Request(data), 1 << 26, None, parser, "s")  # type: ignore[arg-type]
        return got.body

    first = orjson.dumps({"messages": history})
    more = orjson.dumps({"messages": [*history, {"role": "user", "content": "y"}]})
    huge = orjson.dumps({"messages": [*history, {"role": "user", "content": "z" * 300_000}]})
    assert asyncio.run(parse(first)) == orjson.loads(first)
    assert hops == [len(first)]
    assert asyncio.run(parse(more)) == orjson.loads(more)
    assert hops == [len(first)]
    assert asyncio.run(parse(huge)) == orjson.loads(huge)
    assert hops == [len(first), len(huge)]
