"""Every token's log probability reaches a streamed chat client once and in order, whatever
chunks the answer's events turn into (none while text is held back, several at once), and a
whole answer carries them all; only the asked-for alternatives are shown."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.generation import TokenLogprob
from app.protocol.chat_logprobs import ChatLogprobs


def token(k: int) -> TokenLogprob:
    top = tuple(TokenLogprob(f"alt{k}.{j}", -1.0 - j, b"a", ()) for j in range(3))
    return TokenLogprob(f"t{k}", -0.5, f"t{k}".encode(), top)


def chunk(with_choice: bool) -> dict[str, Any]:
    choices = [{"index": 0, "delta": {}, "logprobs": None}] if with_choice else []
    return {"object": "chat.completion.chunk", "choices": choices}


EVENTS = st.lists(st.tuples(st.integers(0, 3), st.lists(st.booleans(), max_size=3)),
                  max_size=12)  # fmt: skip
"""Per upstream event: how many tokens it carries, and the chunks it turns into (with a
choice, or usage-only)."""


@given(events=EVENTS, top=st.integers(0, 3))
def test_each_token_reaches_the_stream_once_in_order(
    events: list[tuple[int, list[bool]]], top: int
) -> None:
    logprobs, sent, made = ChatLogprobs(top), [], 0
    for count, shapes in [*events, (0, [True])]:  # the last chunk always has a choice
        logprobs.add(token(made + k) for k in range(count))
        made += count
        for out in logprobs.attach([chunk(shape) for shape in shapes]):
            if out["choices"] and out["choices"][0]["logprobs"] is not None:
                sent += out["choices"][0]["logprobs"]["content"]
    assert [t["token"] for t in sent] == [f"t{k}" for k in range(made)]
    assert all(len(t["top_logprobs"]) == top for t in sent)


def test_not_asked_leaves_the_answer_as_it_was() -> None:
    logprobs = ChatLogprobs(None)
    logprobs.add([token(0)])
    completion = {"choices": [{"index": 0, "message": {}, "logprobs": None}]}
    assert logprobs.completed(completion)["choices"][0]["logprobs"] is None
    asked = ChatLogprobs(1)
    asked.add([token(0), token(1)])
    content = asked.completed(completion)["choices"][0]["logprobs"]["content"]
    assert [t["token"] for t in content] == ["t0", "t1"]
    assert content[0]["top_logprobs"] == [{"token": "alt0.0", "logprob": -1.0, "bytes": [97]}]
