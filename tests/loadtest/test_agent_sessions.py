"""Tests for loadtest.agent_sessions, the deterministic agent-transcript generator."""

from __future__ import annotations

import re
import statistics
import sys
from collections import deque
from collections.abc import Iterator
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest

# The repository root holds the `loadtest` package; make it importable however pytest is
# started (plain `pytest` does not put the working directory on sys.path).
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from loadtest.agent_sessions import (  # noqa: E402
    MARKUPS,
    Markup,
    chat_requests,
    corpus,
    fresh_call,
    session_calls,
)

_THINK = re.compile(r"<think>\n.*?\n</think>\n\n", re.DOTALL)
_BILLING = re.compile(
    r"x-anthropic-billing-header: cc_version=[0-9.]+[0-9a-f]+; cch=([0-9a-f]{5});\n"
)

# Where the latest *real* user message starts, per markup (tool results are excluded).
_USER_START = {
    "qwen3": re.compile(r"<\|im_start\|>user\n(?!<tool_response>)"),
    "llama3": re.compile(r"<\|start_header_id\|>user<\|end_header_id\|>\n\n"),
    "deepseek_v3": re.compile(r"<｜User｜>"),
    "gpt2": re.compile(r"### user:\n"),
}


def _calls(key: str, seed: int, target: int, **kw: object) -> list[str]:
    return list(session_calls(seed, MARKUPS[key], target_chars=target, **kw))  # type: ignore[arg-type]


def _stream(key: str, seed: int, target: int, billing: bool, think: bool) -> Iterator[str]:
    # Streamed, not stored: a session's calls together hold O(calls * length) characters.
    return session_calls(
        seed, MARKUPS[key], target_chars=target, billing_line=billing, drop_thinking=think
    )


@cache
def _last(key: str, seed: int, target: int, billing: bool = False, think: bool = False) -> str:
    return deque(_stream(key, seed, target, billing, think), maxlen=1)[0]


def _last_user_start(key: str, text: str) -> int:
    starts = [m.start() for m in _USER_START[key].finditer(text)]
    assert starts, "no user message found"
    return starts[-1]


# ---- markups --------------------------------------------------------------------------


def test_markup_presets() -> None:
    assert set(MARKUPS) == {
        "qwen3", "llama3", "deepseek_v3", "gpt2", "cl100k", "o200k", "smollm2",
        "tekken", "qwen35", "gemma3", "glm", "kimi",
    }  # fmt: skip
    q = MARKUPS["qwen3"]
    assert q.start("user") == "<|im_start|>user\n"
    assert q.end == "<|im_end|>\n"
    assert q.generation_prompt == "<|im_start|>assistant\n"
    ll = MARKUPS["llama3"]
    assert ll.start("system") == "<|start_header_id|>system<|end_header_id|>\n\n"
    assert ll.end == "<|eot_id|>"
    assert ll.bos == "<|begin_of_text|>"
    ds = MARKUPS["deepseek_v3"]
    assert ds.start("user") == "<｜User｜>"
    assert ds.generation_prompt == "<｜Assistant｜>"
    assert ds.end_for("assistant") == "<｜end▁of▁sentence｜>"
    assert ds.end_for("user") == ""
    for key in ("gpt2", "cl100k", "o200k"):
        m = MARKUPS[key]
        assert m.start("user") == "### user:\n"
        assert "<|endoftext|>" in m.end
        assert m.name == key
    assert isinstance(q, Markup)
    with pytest.raises(AttributeError):
        q.end = "x"  # type: ignore[misc]


def test_argument_validation() -> None:
    with pytest.raises(ValueError):
        session_calls(0, MARKUPS["qwen3"], target_chars=0)
    with pytest.raises(ValueError):
        session_calls(0, MARKUPS["qwen3"], target_chars=10, append_chars=0)
    with pytest.raises(ValueError):
        session_calls(0, MARKUPS["qwen3"], target_chars=10, max_calls=0)


# ---- determinism and stopping -----------------------------------------------------------


@pytest.mark.parametrize("flags", [(False, False), (True, True)])
def test_deterministic(flags: tuple[bool, bool]) -> None:
    billing, think = flags
    a = _calls("qwen3", 11, 120_000, billing_line=billing, drop_thinking=think)
    b = _calls("qwen3", 11, 120_000, billing_line=billing, drop_thinking=think)
    assert a == b
    c = _calls("qwen3", 12, 120_000, billing_line=billing, drop_thinking=think)
    assert a != c
    assert a[0][:2000] != c[0][:2000]


def test_stops_at_target_and_max_calls() -> None:
    lens = [len(t) for t in _stream("llama3", 3, 200_000, False, False)]
    assert lens[-1] >= 200_000
    assert all(n < 200_000 for n in lens[:-1])
    assert len(_calls("llama3", 3, 10**9, max_calls=5)) == 5
    assert len(_calls("llama3", 3, 1)) == 1  # the first call already reaches the target


@pytest.mark.parametrize("key", ["qwen3", "llama3", "deepseek_v3", "gpt2", "cl100k", "o200k"])
def test_every_call_is_a_full_rendered_transcript(key: str) -> None:
    m = MARKUPS[key]
    texts = _calls(key, 5, 100_000)
    for t in texts:
        assert t.startswith(m.bos + m.start("system"))
        assert t.endswith(m.generation_prompt)
        assert "x-anthropic-billing-header" not in t
        assert "<think>\n" not in t
    assert len(texts[0]) > 5_000  # system prompt with tool schemas is several KB
    assert '"$schema": "http://json-schema.org/draft-07/schema#"' in texts[0]


# ---- prefix / edit structure ------------------------------------------------------------


@pytest.mark.parametrize("key", ["qwen3", "llama3", "deepseek_v3", "gpt2"])
def test_append_only_without_billing_and_thinking(key: str) -> None:
    gen = MARKUPS[key].generation_prompt
    n = 0
    for a, b in pairwise(_stream(key, 21, 300_000, False, False)):
        n += 1
        assert a.endswith(gen)
        assert b.startswith(a[: -len(gen)])
        assert len(b) > len(a)
    assert n > 50


def test_billing_line_changes_every_call() -> None:
    m = MARKUPS["qwen3"]
    gen = m.generation_prompt
    head = m.start("system")
    cchs = []
    versions = set()
    prev = ""
    for t in _stream("qwen3", 4, 200_000, True, False):
        assert t.startswith(head + "x-anthropic-billing-header: cc_version=")
        mm = _BILLING.match(t, len(head))
        assert mm is not None
        cchs.append(mm.group(1))
        versions.add(t[len(head) : t.index(";", len(head))])
        assert t.count("x-anthropic-billing-header") == 1
        # Apart from the billing line the session is append-only.
        stripped = t[: mm.start()] + t[mm.end() :]
        assert stripped.startswith(prev[: -len(gen)])
        prev = stripped
    assert len(cchs) > 20
    assert len(versions) == 1  # cc_version is fixed for the session
    assert all(x != y for x, y in pairwise(cchs))


@pytest.mark.parametrize("key", ["qwen3", "llama3", "deepseek_v3", "gpt2"])
def test_think_blocks_dropped_before_latest_user_message(key: str) -> None:
    m = MARKUPS[key]
    gen = m.generation_prompt
    dropped_calls = 0
    max_kept = 0
    for a, b in pairwise(_stream(key, 8, 400_000, False, True)):
        a0 = a[: -len(gen)]
        if b.startswith(a0):
            continue
        # A new user message arrived: every think block of the previous call is gone,
        # the rest of the previous call is a prefix of the new one.
        dropped_calls += 1
        assert _THINK.search(a0) is not None
        assert b.startswith(_THINK.sub("", a0))
    for t in _stream(key, 8, 400_000, False, True):
        cut = _last_user_start(key, t)
        assert "<think>" not in t[:cut]  # only the turns after the latest user keep thinking
        kept = len(_THINK.findall(t[cut:]))
        max_kept = max(max_kept, kept)
        assert kept == t.count("<think>\n")
    assert dropped_calls >= 5
    assert max_kept >= 3  # tool loops keep several think blocks until the next user turn


def test_billing_and_thinking_together() -> None:
    texts = list(_stream("qwen3", 9, 150_000, True, True))
    cchs = [_BILLING.search(t).group(1) for t in texts]  # type: ignore[union-attr]
    assert all(x != y for x, y in pairwise(cchs))
    assert any("<think>\n" in t for t in texts)


# ---- size distribution ------------------------------------------------------------------


@pytest.mark.parametrize("append_chars", [1400, 4000])
def test_append_sizes_heavy_tailed(append_chars: int) -> None:
    lens = [
        len(t)
        for t in session_calls(
            2, MARKUPS["gpt2"], target_chars=1_500_000, append_chars=append_chars
        )
    ]
    apps = [b - a for a, b in pairwise(lens)]
    mean = statistics.mean(apps)
    assert 0.75 * append_chars < mean < 1.3 * append_chars
    assert statistics.median(apps) < mean  # right-skewed
    assert min(apps) < 0.25 * append_chars  # some tiny appends
    assert max(apps) > 7 * append_chars  # some huge tool outputs
    assert sum(a > 10_000 for a in apps) >= 3 if append_chars == 1400 else True


def test_fresh_stretches_every_so_many_calls_leave_the_other_appends_alone() -> None:
    lens = [
        len(t)
        for t in session_calls(
            5, MARKUPS["qwen3"], target_chars=2_000_000, fresh_every=5, fresh_chars=20_000
        )
    ]
    apps = list(enumerate((b - a for a, b in pairwise(lens)), start=1))
    fresh = [size for k, size in apps if fresh_call(k, 5)]
    usual = [size for k, size in apps if not fresh_call(k, 5)]
    assert len(fresh) >= 10 and all(20_000 <= size < 21_000 for size in fresh)
    # the nudge towards the mean append leaves the reads out (with them: ~0.65 x the mean)
    assert 0.8 * 1400 < statistics.mean(usual) < 1.3 * 1400
    assert [k for k, _ in apps if fresh_call(k, 5)][:2] == [5, 10]


def test_a_fresh_stretch_is_a_read_of_new_text_in_chat_requests() -> None:
    bodies = list(chat_requests(5, target_chars=200_000, fresh_every=7, fresh_chars=30_000))
    for k in range(7, len(bodies), 7):
        before, after = bodies[k - 1]["messages"], bodies[k]["messages"]
        read, result = after[len(before) :]
        assert read["tool_calls"][0]["function"]["name"] == "Read"
        assert len(result["content"]) == 30_000 and result["role"] == "tool"
        seen = "".join(m["content"] or "" for m in before)
        assert result["content"][1000:1200] not in seen


# ---- content ----------------------------------------------------------------------------

_CLASSES: dict[str, str] = {
    "cjk": r"[\u4e00-\u9fff]",
    "kana": r"[\u3040-\u30ff]",
    "halfwidth_kana": r"[\uff66-\uff9f]",
    "hangul": r"[\uac00-\ud7a3]",
    "cyrillic": r"[\u0400-\u04ff]",
    "arabic": r"[\u0600-\u06ff]",
    "hebrew": r"[\u05d0-\u05ea]",
    "devanagari_with_marks": r"[\u0900-\u097f][\u093e-\u094d\u0901-\u0903\u093c]",
    "thai": r"[\u0e00-\u0e7f]",
    "combining_acute_decomposed": "[a-zA-Z]\u0302?\u0301",
    "combining_marks_vi": "[\u0300\u0303\u0309\u0323]",
    "zwj_emoji": "\u200d[\U0001f300-\U0001faff\u2640\u2642]",
    "skin_tone": "[\U0001f3fb-\U0001f3ff]",
    "flag": "[\U0001f1e6-\U0001f1ff]{2}",
    "odd_spaces": "[\u00a0\u200b\u3000\u202f]",
    "crlf": "\r\n",
    "lone_cr": "\r(?!\n)",
    "tab": "\t",
    "trailing_ws": "[ \t]+\n",
    "blank_run": "\n\n\n\n",
    "dont": r"\bdon't\b",
    "ILL_upper": r"\bI'LL\b",
    "weve": r"\b[Ww]e've\b|\bWE'VE\b",
    "curly_apostrophe": "\u2019",
    "special_token_in_code_string": r"\"<\|im_end\|>\"",
    "deepseek_lookalike": "<｜end▁of▁sentence｜>",
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
    "sha40": r"\b[0-9a-f]{40}\b",
    "sha256": r"\b[0-9a-f]{64}\b",
    "iso_timestamp": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z",
    "long_number": r"18446744073709551615|9007199254740993",
    "base64": r"[A-Za-z0-9+/]{76}\n[A-Za-z0-9+/]{20}",
    "pem": "-----BEGIN CERTIFICATE-----",
    "unified_diff": r"diff --git a/\S+ b/\S+\nindex [0-9a-f]{7}\.\.[0-9a-f]{7}",
    "hunk": r"\n@@ -\d+,\d+ \+\d+,\d+ @@",
    "pytest": r"=+ test session starts =+",
    "cargo": r"test result: (ok|FAILED)\. \d+ passed",
    "traceback": r"Traceback \(most recent call last\):\n  File \"",
    "caret_line": r"\n +\^{10,}\n",
    "ls_la": r"\n[d-]rw[x-]r-[x-]r-[x-] +\d+ ",
    "git_status_tab": "\tmodified:   ",
    "ansi": "\x1b\\[3[12]m",
    "box_drawing": "[\u2501\u251c\u2502\u2514]",
    "markdown_table": r"\n\|[-:]+\|",
    "python_indent": r"\n        (if|for|return|raise) ",
    "rust": r"impl |fn \w+\(|#\[derive\(",
    "js": r"=> \{|const \w+ = ",
    "yaml": r"\n  \w+:\n    ",
    "minified_json": r"\":\{\"|\",\"",
    "read_arrow": r"\n +\d+\u2192",
    "bom": "\ufeff",
}


@cache
def _content_sample() -> str:
    texts = [_last("qwen3", 1, 1_500_000, think=True)]
    texts.append(_last("llama3", 2, 400_000, billing=True))
    texts.append(corpus(0, 1_500_000))
    return "\n".join(texts)


@pytest.mark.parametrize("name", sorted(_CLASSES))
def test_adversarial_content_present(name: str) -> None:
    assert re.search(_CLASSES[name], _content_sample()), name


def test_tool_call_rendering() -> None:
    q = _last("qwen3", 21, 300_000)
    assert re.search(r'<tool_call>\n\{"name": "\w+", "arguments": \{', q)
    assert "<|im_start|>user\n<tool_response>\n" in q
    ll = _last("llama3", 21, 300_000)
    assert re.search(r'\{"name": "\w+", "parameters": \{', ll)
    assert "<|start_header_id|>ipython<|end_header_id|>\n\n" in ll
    ds = _last("deepseek_v3", 21, 300_000)
    assert "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>" in ds
    assert "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" in ds


def test_sessions_differ_in_content() -> None:
    a = _last("gpt2", 21, 300_000)
    b = _calls("gpt2", 22, 300_000)[-1]
    # Different seeds draw different projects, identifiers and numbers.
    ids_a = set(re.findall(r"\b[a-z]+_[a-z]+_[a-z]+\b", a))
    ids_b = set(re.findall(r"\b[a-z]+_[a-z]+_[a-z]+\b", b))
    assert len(ids_a ^ ids_b) > 20


# ---- corpus -----------------------------------------------------------------------------


def test_corpus() -> None:
    a = corpus(5, 300_000)
    assert len(a) == 300_000
    assert a == corpus(5, 300_000)
    assert a != corpus(6, 300_000)
    assert corpus(5, 1000) == a[:1000]  # a shorter corpus is a prefix of a longer one
    assert corpus(5, 0) == ""


def test_large_session_smoke() -> None:
    """A 4M-character session (timing is reported by benchmarks, not asserted here)."""
    n = 0
    last = 0
    for text in session_calls(
        7, MARKUPS["qwen3"], target_chars=4_000_000, billing_line=True, drop_thinking=True
    ):
        n += 1
        last = len(text)
    assert last >= 4_000_000
    assert 1500 < n < 6000
