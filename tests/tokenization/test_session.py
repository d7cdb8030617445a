"""SessionTokenizer against the reference: whatever happened before, the ids are exact."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.errors import InvalidTextError
from app.sessions import SessionTokenizer
from app.tokenization import Encoding
from tests.adversarial import grown_texts
from tests.tokenization.conftest import PRE_SPLIT_FAMILIES as FAMILIES


def _ids(tok: Tokenizer, text: str, special: bool = False) -> list[int]:
    return list(tok.encode(text, add_special_tokens=special).ids)


def _check_copied(enc: Encoding) -> None:
    """The stretches an encoding says it copied are in order and hold the source's ids."""
    assert enc.copied is not None
    cursor = 0
    for first, last, at in enc.copied.runs:
        assert 0 <= first < last <= len(enc.copied.source) and at >= cursor
        assert np.array_equal(enc.ids[at : at + last - first], enc.copied.source[first:last])
        cursor = at + last - first
    assert cursor <= len(enc.ids)


@pytest.mark.parametrize("name", FAMILIES)
def test_grown_sessions_match_reference(
    name: str,
    session_tokenizers: dict[str, SessionTokenizer],
    reference: Callable[[str], Tokenizer],
) -> None:
    tok, ref = session_tokenizers[name], reference(name)
    counter = iter(range(10**9))

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(grown_texts(), st.booleans())
    def run(versions: list[str], keyed: bool) -> None:
        session = f"t{next(counter) % 3}/s{next(counter)}" if keyed else None
        previous = None
        for text in versions:
            enc = tok.encode(text, session=session, tenant="anon")
            assert list(enc.ids) == _ids(ref, text), (versions, text, enc.route)
            assert enc.route != "hit" or enc.reused_tokens == len(enc.ids)
            if enc.copied is not None:
                _check_copied(enc)
                assert enc.copied.source is previous or previous is None or not keyed
            previous = enc.ids

    run()
    info = tok.explain()
    routes = info["counters"]
    assert routes.get("route:append", 0) > 50 and routes.get("route:edit", 0) > 10
    assert info["parallel_chunks"]["texts"] > 50, "cold starts and long fresh text in chunks"


def test_long_session_with_edits_near_start_and_middle(
    assets: dict[str, Path], reference: Callable[[str], Tokenizer]
) -> None:
    """Claude-style billing hash edits at the start, Qwen-style think removal in the middle."""
    tok, ref = SessionTokenizer.from_file(assets["qwen3"]), reference("qwen3")
    body = "".join(f"line {i}: value = compute({i}, 'x')\n" for i in range(400))
    routes = []
    for turn in range(6):
        think = "<think>\nI should look at the file first.\n</think>\n\n" if turn % 2 else ""
        text = (
            f"<|im_start|>system\ncc_version=2.1; cch={turn * 7919:05x};\nYou are helpful."
            f"<|im_end|>\n{body}<|im_start|>assistant\n{think}Done {turn}.<|im_end|>\n"
            + "more text here\n"
            * turn
        )
        enc = tok.encode(text, session="acme/claude-1")
        assert list(enc.ids) == _ids(ref, text)
        assert enc.lookup_s > 0 and (enc.window >= 512) == (enc.route == "edit")
        routes.append(enc.route)
    assert routes[0] == "full" and set(routes[1:]) == {"edit"}


def test_evictions_between_calls_stay_exact(
    assets: dict[str, Path], reference: Callable[[str], Tokenizer]
) -> None:
    tok = SessionTokenizer.from_file(assets["gpt2"], store_bytes=6_000)
    ref = reference("gpt2")
    texts = {s: f"Session {s} says hello to the world. " * 20 for s in range(5)}
    for step in range(6):
        for s in range(5):
            texts[s] += f"step {step} adds words number {step * s} and more "
            assert list(tok.encode(texts[s], session=f"a/{s}").ids) == _ids(ref, texts[s])
    stats = tok.explain()["store"]
    assert stats["evictions"] > 0 and stats["bytes"] <= 6_000


def test_concurrent_callers_on_one_session(
    assets: dict[str, Path], reference: Callable[[str], Tokenizer]
) -> None:
    tok, ref = SessionTokenizer.from_file(assets["cl100k"]), reference("cl100k")
    base = "The quick brown fox jumps over the lazy dog. " * 50
    errors: list[str] = []

    def worker(seed: int) -> None:
        text = base
        for i in range(30):
            text += f" thread {seed} appends {i * seed} pipe"
            variant = text if i % 3 else base + f"line {i}"
            if list(tok.encode(variant, session="x/shared").ids) != _ids(ref, variant):
                errors.append(variant)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_tenants_never_share_state(assets: dict[str, Path]) -> None:
    tok = SessionTokenizer.from_file(assets["qwen3"])
    text = "shared system prompt with enough bytes to be indexed by content. " * 10
    tok.encode(text, tenant="alpha")
    assert tok.encode(text + " more", tenant="beta").route == "full"
    assert tok.encode(text + " more", tenant="alpha").route == "append"
    tok.encode(text, session="alpha/conv")
    assert tok.encode(text + " x", session="gamma/conv").route == "full"


def test_content_lookup_verifies_bytes_not_hashes(assets: dict[str, Path]) -> None:
    """Same checksum anchors, different text before them: no reuse of the wrong prefix."""
    tok = SessionTokenizer.from_file(assets["qwen3"])
    tail = "x" * 256
    tok.encode("A" * 1000 + tail, tenant="t")
    enc = tok.encode("B" * 1000 + tail + " next", tenant="t")
    assert enc.route == "full"


def test_special_frame_when_the_post_processor_adds_bos(
    assets: dict[str, Path], tmp_path: Path
) -> None:
    data = json.loads(assets["llama3"].read_text(encoding="utf-8"))
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [
            {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
        ],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {
            "<|begin_of_text|>": {
                "id": "<|begin_of_text|>",
                "ids": [128000],
                "tokens": ["<|begin_of_text|>"],
            }
        },
    }
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    tok, ref = SessionTokenizer.from_file(path), Tokenizer.from_file(str(path))
    text = "Hello there, general Kenobi.\n"
    for extra in ("", "You are a bold one.\n", "Kill him!\n"):
        text += extra
        for special in (False, True):
            enc = tok.encode(text, session="s/1", add_special_tokens=special)
            assert list(enc.ids) == _ids(ref, text, special)
    assert _ids(ref, "x", True)[0] == 128000


@pytest.mark.parametrize("bad", ["abc\ud800def", "\udfff", 42, b"bytes", None])
def test_bad_input_raises_typed_error(
    bad: object, session_tokenizers: dict[str, SessionTokenizer]
) -> None:
    with pytest.raises(InvalidTextError):
        session_tokenizers["qwen3"].encode(bad, session="t/bad")  # type: ignore[arg-type]


def test_ids_are_read_only_int32(session_tokenizers: dict[str, SessionTokenizer]) -> None:
    enc = session_tokenizers["o200k"].encode("hello world", session="t/ro")
    assert enc.ids.dtype == np.int32
    with pytest.raises(ValueError):
        enc.ids[0] = 1


def test_unproven_tokenizer_takes_full_path_and_says_why(
    assets: dict[str, Path], reference: Callable[[str], Tokenizer], tmp_path: Path
) -> None:
    data = json.loads(assets["gpt2"].read_text(encoding="utf-8"))
    data["normalizer"] = {"type": "Lowercase"}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    tok, ref = SessionTokenizer.from_file(path), Tokenizer.from_file(str(path))
    text = "Hello World "
    for _ in range(3):
        text += "MORE Words "
        enc = tok.encode(text, session="t/u")
        assert enc.route == "full" and list(enc.ids) == _ids(ref, text)
    info = tok.explain()
    assert info["proven"] is False and "Lowercase" in info["unproven_reason"]


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("edits", [False, True], ids=["appends", "billing+think"])
def test_generated_agent_sessions_exact(
    name: str, edits: bool, assets: dict[str, Path], reference: Callable[[str], Tokenizer]
) -> None:
    """Realistic transcripts (tool schemas, code, logs, diffs, multilingual text) call by call."""
    from loadtest.agent_sessions import MARKUPS, session_calls

    tok, ref = SessionTokenizer.from_file(assets[name]), reference(name)
    calls = session_calls(
        11, MARKUPS[name], target_chars=40_000, billing_line=edits, drop_thinking=edits
    )
    routes = []
    for text in calls:
        enc = tok.encode(text, session="ci/agent")
        assert list(enc.ids) == _ids(ref, text), (len(text), enc.route)
        routes.append(enc.route)
    assert routes[0] == "full" and "full" not in routes[1:]
    assert tok.explain()["first_window_acceptance"] >= 0.99


def test_bad_append_after_good_calls_keeps_session_usable(
    assets: dict[str, Path], reference: Callable[[str], Tokenizer]
) -> None:
    tok, ref = SessionTokenizer.from_file(assets["qwen3"]), reference("qwen3")
    text = "A stable transcript that keeps growing. " * 30
    tok.encode(text, session="t/bad-tail")
    with pytest.raises(InvalidTextError, match="character 1201"):
        tok.encode(text + "x\ud800", session="t/bad-tail")
    text += "and grows again"
    enc = tok.encode(text, session="t/bad-tail")
    assert enc.route == "append" and list(enc.ids) == _ids(ref, text)


def test_forget_makes_the_next_call_encode_in_full(
    session_tokenizers: dict[str, SessionTokenizer],
) -> None:
    tok = session_tokenizers["gpt2"]
    text = "Remember this transcript for a while, please. " * 10
    tok.encode(text, session="t/forget")
    assert tok.encode(text + "More.", session="t/forget").route == "append"
    tok.forget("t/forget")
    assert tok.encode(text + "More. Again.", session="t/forget").route == "full"


@pytest.mark.parametrize("text", ["pipeA\u030a", "A\u030a", "x A\u030a y", "e\u0301\u0301"])
def test_last_end_is_the_text_end_when_normalization_composes(
    text: str, assets: dict[str, Path], reference: Callable[[str], Tokenizer]
) -> None:
    """NFC composes a trailing combining mark into the character before it, and HF gives the
    mark no offset: the last token still ends where the text does (stored states say so)."""
    from app.tokenization.reference import ReferenceEncoder

    ids, ends = ReferenceEncoder(reference("qwen3")).encode(text)
    assert list(ids) == _ids(reference("qwen3"), text)
    assert int(ends[-1]) == len(text.encode()) and bool((np.diff(ends) >= 0).all())


def test_appends_grow_the_stored_arrays_in_place(
    session_tokenizers: dict[str, SessionTokenizer], reference: Callable[[str], Tokenizer]
) -> None:
    tok, ref = session_tokenizers["qwen3"], reference("qwen3")
    text = "<|im_start|>user\nhello world, " * 40 + "<|im_end|>\n<|im_start|>assistant\n"
    first = tok.encode(text, session="t/grows")
    before = first.ids.copy()
    for more in ("Hi there", ", how can I", " help you today"):
        text += more
        grown = tok.encode(text, session="t/grows")
        assert grown.route == "append" and np.shares_memory(grown.ids, first.ids)
        assert grown.ids.tolist() == _ids(ref, text) and not grown.ids.flags.writeable
    assert np.array_equal(first.ids, before)  # the earlier call's ids never change
