"""Delta records: any state rebuilt exactly from any parent, small for the edits agents make,
and anything damaged, unlinked or out of order is a miss."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.sessions import store_delta, store_entry
from app.tokenization.state import SessionState
from loadtest.agent_sessions import MARKUPS, session_calls
from loadtest.redis_writes import stored_states
from tests.adversarial import grown_texts
from tests.tokenization.stored_states import FINGERPRINT, same, state_of

PARENT = b"\x07" * 16


def test_any_state_from_any_parent(reference: Callable[[str], Tokenizer]) -> None:
    """Successive versions (appends, edits, cuts, repeats) and unrelated pairs alike."""
    ref = reference("qwen3")

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(grown_texts(), st.data())
    def run(versions: list[str], data: st.DataObject) -> None:
        parent = state_of(ref, data.draw(st.sampled_from(versions), label="parent"))
        state = state_of(ref, data.draw(st.sampled_from(versions), label="state"))
        record = store_delta.encode(parent, PARENT, state)
        assert same(store_delta.apply(parent, PARENT, record), state)
        assert store_delta.apply(parent, b"\x08" * 16, record) is None  # another parent
        cut = data.draw(st.integers(0, len(record) - 1), label="truncated at")
        assert store_delta.apply(parent, PARENT, record[:cut]) is None
        assert store_delta.apply(parent, PARENT, record + b"\x00") is None
        at = data.draw(st.integers(0, len(record) - 1), label="flipped byte")
        damaged = bytearray(record)
        damaged[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        assert store_delta.apply(parent, PARENT, bytes(damaged)) is None

    run()


@pytest.mark.parametrize("billing_line", [False, True])
def test_continuation_records_are_small(assets: dict[str, Path], billing_line: bool) -> None:
    """Appends, and Claude Code's billing line (an edit at the start) with an append: each
    record holds the new tokens, a few around the edit, and a segment table."""
    calls = session_calls(
        4, MARKUPS["qwen3"], target_chars=60_000, billing_line=billing_line, max_calls=40
    )
    states = stored_states(assets["qwen3"], calls)
    for parent, state in itertools.pairwise(states[20:]):
        record = store_delta.encode(parent, PARENT, state)
        assert same(store_delta.apply(parent, PARENT, record), state)
        new_bytes = len(state.text) - len(parent.text)
        assert len(record) < 4 * max(new_bytes, 0) + 1024, (len(record), new_bytes)


def chain(states: list[SessionState]) -> tuple[bytes, list[bytes], bytes]:
    base = store_entry.encode(states[0], FINGERPRINT)
    records, at = [], store_entry.digest(base)
    for parent, state in itertools.pairwise(states):
        records.append(store_delta.encode(parent, at, state))
        at = store_delta.digest(records[-1])
    return base, records, at


def test_chains_rebuild_the_last_state_or_nothing(assets: dict[str, Path]) -> None:
    texts = session_calls(6, MARKUPS["qwen3"], target_chars=20_000, max_calls=6)
    states = stored_states(assets["qwen3"], texts)
    base, records, head = chain(states)
    assert same(store_delta.decode_chain(base, records, head, FINGERPRINT), states[-1])
    broken = {
        "a record missing": (base, records[:2] + records[3:], head),
        "records swapped": (base, [records[1], records[0], *records[2:]], head),
        "the last record missing": (base, records[:-1], head),
        "another head": (base, records, store_entry.digest(base)),
        "another base": (store_entry.encode(states[1], FINGERPRINT), records, head),
    }
    for what, (b, r, h) in broken.items():
        assert store_delta.decode_chain(b, r, h, FINGERPRINT) is None, what
    assert store_delta.decode_chain(base, records, head, b"\x02" * 8) is None
