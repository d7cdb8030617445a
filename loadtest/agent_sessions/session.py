"""Agent sessions: the full transcript of each model call, and a mixed corpus."""

from __future__ import annotations

from collections.abc import Iterator
from random import Random

from .content import Content
from .markup import MARKUPS, Markup
from .rendering import format_call, render_assistant, render_results, render_user
from .turns import SessionPlan, ToolTurn, check_args


def session_calls(
    seed: int,
    markup: Markup,
    *,
    target_chars: int,
    append_chars: int = 1400,
    billing_line: bool = False,
    drop_thinking: bool = False,
    max_calls: int | None = None,
    fresh_every: int = 0,
    fresh_chars: int = 60_000,
) -> Iterator[str]:
    """Yield the full transcript text of each successive model call of one agent session.

    Call k+1's text is call k's text minus the trailing generation prompt, plus the
    assistant's answer and the next tool result(s) or user message, plus the generation
    prompt -- except that with ``billing_line`` the ``cch`` value in the first system block
    changes every call, and with ``drop_thinking`` the think blocks of assistant turns before
    the latest user message are removed.  Stops after yielding the first call whose text has
    at least ``target_chars`` characters, or after ``max_calls`` calls.  ``fresh_every``:
    every so many calls append a read of a new ``fresh_chars``-character file instead
    (``SessionPlan``).
    """
    check_args(target_chars, append_chars, max_calls)
    plan = SessionPlan(
        seed,
        append_chars,
        tool_reasoning=drop_thinking,
        fresh_every=fresh_every,
        fresh_chars=fresh_chars,
    )
    return _session(plan, markup, target_chars, billing_line, drop_thinking, max_calls)


def _session(
    plan: SessionPlan,
    m: Markup,
    target_chars: int,
    billing_line: bool,
    drop_thinking: bool,
    max_calls: int | None,
) -> Iterator[str]:
    _warm_allocator(4 * (target_chars + (1 << 18)))
    head = m.bos + m.start("system")
    # frozen: everything after the billing line that can no longer change (one cached str).
    # live: recent parts; with drop_thinking, the assistant turns since the latest user
    # message (whose think blocks a later user message will drop) live here.
    frozen = plan.content.system_prompt(m) + m.end_for("system")
    live: list[str] = [render_user(m, plan.first_user())]
    swaps: list[tuple[int, str]] = []  # (index in live, rendering without think)
    gen = m.generation_prompt
    calls = 0
    appended = 0
    while True:
        billing = plan.billing() if billing_line else ""
        text = "".join((head, billing, frozen, *live, gen))
        calls += 1
        yield text
        if len(text) >= target_chars or (max_calls is not None and calls >= max_calls):
            return
        if billing_line:
            plan.next_billing()
        turn = plan.next_turn(appended)
        if isinstance(turn, ToolTurn):
            with_t, without_t = render_assistant(m, turn.reasoning, turn.prose, turn.calls)
            if turn.reasoning:
                swaps.append((len(live), without_t))
            new_parts = [with_t, render_results(m, turn.results)]
        else:
            _, asst = render_assistant(m, "", turn.answer, ())
            for i, s in swaps:  # Qwen3: think blocks before the latest user message go
                live[i] = s
            swaps.clear()
            new_parts = [asst, render_user(m, turn.user)]
        live.extend(new_parts)
        appended += sum(map(len, new_parts))
        if not swaps and len(live) >= 48:
            frozen += "".join(live)
            live.clear()


def _warm_allocator(nbytes: int) -> None:
    """Allocate and free one buffer as large as the biggest transcript we will yield.

    The yielded strings grow monotonically (UCS-4 once an emoji appears: 4 bytes a char).
    glibc serves each one with a fresh mmap, because every request is just above the
    dynamic mmap threshold set by the previous free, so every call page-faults the whole
    transcript in again (~5x slower than the copy itself).  Freeing one mmapped chunk of
    the final size first raises that threshold (glibc caps it at 32 MiB), after which the
    strings reuse heap memory.  Elsewhere this is just a short-lived allocation.
    """
    buf = bytearray(min(nbytes, 32 << 20))
    del buf


def corpus(seed: int, chars: int) -> str:
    """One long mixed text of exactly ``chars`` characters from the session content pools."""
    if chars <= 0:
        return ""
    r = Random(seed)
    c = Content(r)
    m = r.choice(list(MARKUPS.values()))
    pieces: list[str] = [c.system_prompt(m)[: max(0, min(chars, r.randint(500, 6000)))]]
    total = len(pieces[0])
    while total < chars:
        size = int(min(30_000.0, r.lognormvariate(6.5, 1.0)))
        k = r.randrange(12)
        if k == 0:
            s = c.user_message(size)
        elif k == 1:
            s = c.final_answer(size)
        elif k == 2:
            s = c.reasoning(size)
        elif k == 3:
            s = c.web_page(size)
        elif k == 4:
            s = c.base64_blob(min(size, 3000))
        elif k == 5:
            s = c.traceback()
        elif k == 6:
            rel, lang = c.path()
            s = c.read_output(rel, lang, size)
        elif k == 7:
            name, args, _ = c.tool_call(size)
            s = format_call(m, name, args)
        else:
            s = c.bash(size)[2]
        if r.random() < 0.05:
            s = s.replace("\n", "\r\n")
        sep = r.choice(("\n\n", "\n", "\n\n\n\n", " ", "\t"))
        pieces.append(sep + s)
        total += len(sep) + len(s)
    return "".join(pieces)[:chars]
