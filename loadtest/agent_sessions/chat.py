"""Agent sessions as OpenAI ``/v1/chat/completions`` request bodies."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from random import Random
from string import ascii_letters, digits
from typing import Any

from .templates import TOOL_SCHEMAS
from .turns import SessionPlan, ToolTurn, check_args

Message = dict[str, Any]

_BASE62 = digits + ascii_letters
# Tool-call id styles seen in the wild: OpenAI, Anthropic, vLLM.
_ID_STYLES = (
    ("call_", _BASE62, 24),
    ("toolu_01", _BASE62, 22),
    ("chatcmpl-tool-", "0123456789abcdef", 32),
)


@dataclass(frozen=True)
class Shape:
    """What a model's chat template accepts of an agent's tool-call turns (its template raises
    on anything else); the default is what the OpenAI API allows."""

    single_calls: bool = False
    """One call per assistant turn (Llama 3.x): a turn of several calls is sent as that many
    turns, each followed by its result; the reasoning and prose go with the first."""
    calls_alone: bool = False
    """No prose beside tool calls (gpt-oss: not both reasoning and content)."""
    nine_char_ids: bool = False
    """Call ids of nine letters and digits (Mistral)."""
    string_content: bool = False
    """A tool-call turn without prose has ``""`` as its content, never ``None`` (Devstral's
    template indexes a content that is not a string)."""


def tool_definitions() -> list[dict[str, Any]]:
    """The agent's tools as OpenAI function tools (fresh dicts on every call)."""
    return [json.loads(s) for s in TOOL_SCHEMAS]


def session_id(seed: int) -> str:
    """The stable id of session ``seed`` (a UUID4 string; the ``user`` field of its bodies)."""
    return str(uuid.UUID(int=Random(f"agent-session:{seed}").getrandbits(128), version=4))


def message_chars(msg: Message) -> int:
    """Text characters of one message: content, reasoning, tool names and arguments."""
    n = len(msg.get("content") or "") + len(msg.get("reasoning_content") or "")
    for call in msg.get("tool_calls") or ():
        fn = call["function"]
        n += len(fn["name"]) + len(fn["arguments"])
    return n


def content_chars(messages: Iterable[Message]) -> int:
    """Text characters of a message list (``message_chars`` summed): the size measure."""
    return sum(map(message_chars, messages))


def chat_requests(
    seed: int,
    *,
    target_chars: int,
    append_chars: int = 1400,
    billing_line: bool = False,
    max_calls: int | None = None,
    model: str = "default",
    stream: bool = False,
    reasoning: bool = True,
    shape: Shape = Shape(),
    fresh_every: int = 0,
    fresh_chars: int = 60_000,
) -> Iterator[dict[str, Any]]:
    """Yield the request body of each successive model call of one agent session.

    ``messages`` is a system message, the first user request, then assistant turns
    (``content``, ``reasoning_content`` unless ``reasoning=False``, ``tool_calls`` with JSON
    string arguments; ``content`` is ``""`` or ``None`` -- fixed per session -- when the
    turn only calls tools), the ``tool`` messages answering them, and every few loops the
    assistant's final answer and a new user message.  Each call's messages are the previous
    call's plus the assistant's answer and the next tool results or user message, so the last
    message is a user or tool message.  ``billing_line`` starts the system content with
    Claude Code's billing line, whose ``cch`` changes every call.  ``shape`` fits the tool-call
    turns to what a model's template accepts (the same turns are drawn, except that prose
    dropped by ``calls_alone`` changes the sizes the later turns are drawn to).  Stops after
    yielding the first call whose ``content_chars(messages)`` is at least ``target_chars``, or
    after ``max_calls`` calls.  ``fresh_every``: every so many calls bring a read of a new
    ``fresh_chars``-character file instead (``SessionPlan``).  Bodies also carry ``tools``
    (``tool_definitions()``), ``model``, ``stream``, ``max_tokens=16`` and
    ``user=session_id(seed)``.

    Each body has its own ``messages`` list, but the message dicts (and ``tools``) are
    shared between the bodies of one session: consumers must not mutate them.
    """
    check_args(target_chars, append_chars, max_calls)
    plan = SessionPlan(
        seed,
        append_chars,
        tool_reasoning=reasoning,
        answer_reasoning=reasoning,
        fresh_every=fresh_every,
        fresh_chars=fresh_chars,
    )
    return _requests(
        plan, seed, target_chars, billing_line, max_calls, model, stream, reasoning, shape
    )


def _requests(
    plan: SessionPlan,
    seed: int,
    target_chars: int,
    billing_line: bool,
    max_calls: int | None,
    model: str,
    stream: bool,
    reasoning: bool,
    shape: Shape,
) -> Iterator[dict[str, Any]]:
    system = plan.content.agent_instructions()
    messages: list[Message] = [
        _system(plan, system, billing_line),
        {"role": "user", "content": plan.first_user()},
    ]
    size = content_chars(messages)
    # Tool-call ids come from their own Random so that they leave the content draws alone.
    ids = Random(f"tool-call-ids:{seed}")
    prefix, alphabet, id_len = ids.choice(_ID_STYLES)
    if shape.nine_char_ids:
        prefix, alphabet, id_len = "", _BASE62, 9
    empty = ids.choice(("", None))
    if shape.string_content:
        empty = ""
    tools = tool_definitions()
    user = session_id(seed)
    calls = 0
    appended = 0
    while True:
        calls += 1
        yield {
            "model": model,
            "messages": list(messages),
            "tools": tools,
            "stream": stream,
            "max_tokens": 16,
            "user": user,
        }
        if size >= target_chars or (max_calls is not None and calls >= max_calls):
            return
        if billing_line:
            plan.next_billing()
            messages[0] = _system(plan, system, True)  # replaced, never mutated
        turn = plan.next_turn(appended)
        new: list[Message]
        if isinstance(turn, ToolTurn):
            call_ids = [prefix + "".join(ids.choices(alphabet, k=id_len)) for _ in turn.calls]
            made = list(zip(call_ids, turn.calls, turn.results, strict=True))
            new = []
            for k, group in enumerate([[c] for c in made] if shape.single_calls else [made]):
                prose = "" if k or shape.calls_alone else turn.prose
                asst: Message = {"role": "assistant", "content": prose or empty}
                if turn.reasoning and not k:
                    asst["reasoning_content"] = turn.reasoning
                asst["tool_calls"] = [
                    {
                        "id": i,
                        "type": "function",
                        "function": {
                            "name": name,
                            "arguments": json.dumps(args, ensure_ascii=False),
                        },
                    }
                    for i, (name, args), _ in group
                ]
                new.append(asst)
                new += ({"role": "tool", "tool_call_id": i, "content": out} for i, _, out in group)
        else:
            asst = {"role": "assistant", "content": turn.answer}
            if turn.reasoning:
                asst["reasoning_content"] = turn.reasoning
            new = [asst, {"role": "user", "content": turn.user}]
        added = content_chars(new)
        messages += new
        appended += added
        size += added


def _system(plan: SessionPlan, text: str, billing_line: bool) -> Message:
    return {"role": "system", "content": plan.billing() + text if billing_line else text}
