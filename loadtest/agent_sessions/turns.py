"""The turn plan of one agent session, shared by the text and the chat-request generators."""

from __future__ import annotations

from dataclasses import dataclass
from random import Random
from typing import Any

from .content import Content


@dataclass(frozen=True)
class ToolTurn:
    """An assistant turn that calls tools, and the tools' results (one per call)."""

    reasoning: str
    prose: str
    calls: tuple[tuple[str, dict[str, Any]], ...]
    results: tuple[str, ...]


@dataclass(frozen=True)
class AnswerTurn:
    """The assistant's final answer, then the user's next message."""

    reasoning: str
    answer: str
    user: str


def check_args(target_chars: int, append_chars: int, max_calls: int | None) -> None:
    if target_chars < 1:
        raise ValueError("target_chars must be >= 1")
    if append_chars < 1:
        raise ValueError("append_chars must be >= 1")
    if max_calls is not None and max_calls < 1:
        raise ValueError("max_calls must be >= 1")


def fresh_call(index: int, every: int) -> bool:
    """Whether call ``index`` (0 for a session's first call) of a session drawn with
    ``fresh_every=every`` ends with the fresh stretch (a large file read)."""
    return every > 0 and index > 0 and index % every == 0


def _draw_append(r: Random, mean: float) -> float:
    """Heavy-tailed append size: lognormal body plus ~2.5% of 7-21x spikes (mean ~= mean)."""
    if r.random() < 0.025:
        return mean * r.uniform(7.1, 21.4)
    return r.lognormvariate(0.0, 1.0) * mean * 0.40


def _loop_length(r: Random) -> int:
    """Tool calls between two user messages: often a few, sometimes long."""
    return min(40, int(r.expovariate(1 / 5.0)))


class SessionPlan:
    """Draws the turns of one session from ``random.Random(seed)``.

    Call order (it fixes the draw order): the system prompt from ``content``, then
    ``first_user()``, then before each later call ``next_billing()`` (only with a billing
    line) and ``next_turn(appended)``.  ``appended`` is the consumer's measure of what its
    turns have added so far; turn sizes are nudged so it averages ``append_chars`` a turn.
    With ``fresh_every``, every ``fresh_every``-th turn instead reads a file of
    ``fresh_chars`` characters (``fresh_call`` tells which calls end with one); the other
    turns keep their sizes (the nudge leaves those reads out).
    """

    def __init__(
        self,
        seed: int,
        append_chars: int,
        *,
        tool_reasoning: bool,
        answer_reasoning: bool = False,
        fresh_every: int = 0,
        fresh_chars: int = 60_000,
    ) -> None:
        r = self.r = Random(seed)
        c = self.content = Content(r)
        self._version = f"2.{r.randint(0, 1)}.{r.randint(10, 80)}.{c.hexs(3)}"
        self._cch = c.hexs(5)
        self._append = append_chars
        self._tool_reasoning = tool_reasoning
        self._answer_reasoning = answer_reasoning
        self._turns = 0
        self._loop_left = 0
        self._fresh_every = fresh_every
        self._fresh_chars = fresh_chars
        self._calls = 0
        self._fresh_added = 0

    def billing(self) -> str:
        """Claude Code's billing line, which starts its first system block."""
        return f"x-anthropic-billing-header: cc_version={self._version}; cch={self._cch};\n"

    def next_billing(self) -> None:
        """Draw a new ``cch`` (it changes on every call)."""
        new = self.content.hexs(5)
        while new == self._cch:
            new = self.content.hexs(5)
        self._cch = new

    def first_user(self) -> str:
        r = self.r
        text = self.content.user_message(int(_draw_append(r, self._append)), first=True)
        self._loop_left = _loop_length(r)
        return text

    def next_turn(self, appended: int) -> ToolTurn | AnswerTurn:
        r, c, mean = self.r, self.content, self._append
        self._calls += 1
        if fresh_call(self._calls, self._fresh_every):
            return self._fresh_read()
        # Nudge the running mean towards append_chars (slowly, so the spread stays intact).
        deficit = mean * self._turns - (appended - self._fresh_added)
        self._turns += 1
        factor = min(2.0, max(0.5, 1.0 + deficit / (mean * 200.0)))
        budget = int(_draw_append(r, mean) * factor)
        if self._loop_left > 0:
            self._loop_left -= 1
            reasoning = c.reasoning(budget // 2) if self._tool_reasoning else ""
            prose = c.pre_tool_prose()
            payload = max(0, budget - len(reasoning) - len(prose) - 150)
            n = r.choices((1, 2, 3), weights=(85, 12, 3))[0]
            calls: list[tuple[str, dict[str, Any]]] = []
            results: list[str] = []
            for _ in range(n):
                name, args, out = c.tool_call(payload // n)
                calls.append((name, args))
                results.append(out)
            return ToolTurn(reasoning, prose, tuple(calls), tuple(results))
        reasoning = c.reasoning(budget // 4) if self._answer_reasoning else ""
        answer = c.final_answer(budget // 3 + 40)
        user = c.user_message(max(0, budget - len(reasoning) - len(answer)))
        self._loop_left = _loop_length(r)
        return AnswerTurn(reasoning, answer, user)

    def _fresh_read(self) -> ToolTurn:
        """A Read of a whole file the session has not seen: ``fresh_chars`` of new text."""
        c = self.content
        rel, lang = c.path()
        result = c.read_output(rel, lang, self._fresh_chars)[: self._fresh_chars]
        self._fresh_added += len(result)
        return ToolTurn(
            "", c.pre_tool_prose(), (("Read", {"file_path": c.abspath(rel)}),), (result,)
        )
