"""The proxy's call pattern: ``frozen=True`` with each call's message objects the previous
call's plus new ones (``chat_requests`` shares them so).  The memoized result equals the
fresh render on growing sessions, with edited, deleted and restored messages between calls,
and across the new user turns on which Qwen3 drops earlier reasoning; ``make_room`` leaves
results alone and frees one block per doubling of the prompt."""

from __future__ import annotations

import functools
import random
import sys
from pathlib import Path
from typing import Any

from app.rendering import ChatTemplate, RenderCache
from app.rendering.memo import _MMAP_CEILING
from app.sessions.registry import SessionRegistry
from app.tools import assets

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from loadtest.agent_sessions import chat_requests  # noqa: E402


@functools.cache
def qwen3() -> ChatTemplate:
    return ChatTemplate.from_tokenizer_config(assets.default_dir() / "qwen3/tokenizer_config.json")


def check(cache: RenderCache, messages: list[Any], tools: Any) -> str:
    fresh = qwen3().render(messages, tools=tools)
    memo = qwen3().render(messages, tools=tools, cache=cache, session="s", frozen=True)
    assert memo == fresh
    return memo


def test_growing_sessions_with_think_drops() -> None:
    for seed in (1, 2):
        cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
        turns = 0
        for body in chat_requests(seed, target_chars=40_000, reasoning=True):
            check(cache, body["messages"], body["tools"])
            turns += body["messages"][-1]["role"] == "user"
        assert turns >= 3  # new user turns: Qwen3 drops the reasoning before them


def test_edits_between_calls() -> None:
    """Some calls replace (new object, new text), delete or duplicate an earlier message;
    the next call resends the session's own objects (the edit undone)."""
    rng = random.Random(7)
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    for body in chat_requests(3, target_chars=40_000, reasoning=True):
        messages = list(body["messages"])
        check(cache, messages, body["tools"])
        if rng.random() < 0.5 or len(messages) < 3:
            continue
        edited = list(messages)
        i = rng.randrange(1, len(edited))
        kind = rng.choice(["replace", "delete", "duplicate", "reasoning"])
        if kind == "replace":
            edited[i] = {**edited[i], "content": f"edited {i} \u00e9\U0001f600"}
        elif kind == "delete":
            del edited[i]
        elif kind == "duplicate":
            edited.insert(i, edited[i])
        else:
            edited[i] = {**edited[i], "reasoning_content": "changed"}
        check(cache, edited, body["tools"])


def test_result_held_by_the_caller_or_not() -> None:
    """Results already handed out stay intact while the session goes on (guards any future
    reuse of the previous result's memory)."""
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    results = []
    for body in chat_requests(4, target_chars=20_000, reasoning=True):
        results.append(check(cache, body["messages"], body["tools"]))
    bodies = list(chat_requests(4, target_chars=20_000, reasoning=True))
    assert results == [qwen3().render(b["messages"], tools=b["tools"]) for b in bodies]


def test_make_room_once_per_doubling() -> None:
    cache = RenderCache(SessionRegistry(1 << 30).slot("render"))
    text = "\U0001f600" * 250_000  # UCS-4: ~1 MB
    cache.make_room(text)
    first = cache._headroom
    assert first == 4 * sys.getsizeof(text)
    cache.make_room(text + "x" * 1000)  # a little longer: no new block
    assert cache._headroom == first
    big = text * 3
    cache.make_room(big)
    assert cache._headroom == 4 * sys.getsizeof(big)
    cache.make_room(text * 40)  # beyond glibc's threshold ceiling: capped, then never again
    assert cache._headroom == _MMAP_CEILING
    cache.make_room(text * 80)
    assert cache._headroom == _MMAP_CEILING
