"""The stable-cut rules, proven position by position against the reference.

For every position a family's rules call stable, encoding the two sides separately must give
the reference encode of the whole.  The texts are adversarial (tests/adversarial.py) and every
proven family is checked with its real tokenizer.json.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.tokenization.boundaries import CutRules, trie_pattern
from app.tokenizer_spec import load_spec
from tests.adversarial import long_texts, texts
from tests.tokenization.conftest import PRE_SPLIT_FAMILIES as FAMILIES


def _ids(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def check_all_cuts(rules: CutRules, tok: Tokenizer, text: str) -> int:
    data = text.encode("utf-8")
    whole = _ids(tok, text)
    checked = 0
    for c in range(1, len(data)):
        if rules.is_stable(data, c):
            left, right = data[:c].decode(), data[c:].decode()
            assert _ids(tok, left) + _ids(tok, right) == whole, (text, c)
            checked += 1
    return checked


@pytest.mark.parametrize("name", FAMILIES)
def test_every_stable_cut_splits_exactly(
    name: str, assets: dict[str, Path], reference: Callable[[str], Tokenizer]
) -> None:
    rules = CutRules(load_spec(assets[name]))
    tok = reference(name)
    seen = {"cuts": 0}

    @settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(texts)
    def run(text: str) -> None:
        seen["cuts"] += check_all_cuts(rules, tok, text)

    run()
    assert seen["cuts"] > 1000, "the strategy must reach many stable cuts"


@pytest.mark.parametrize("name", FAMILIES)
def test_rules_fire_on_ordinary_text(name: str, assets: dict[str, Path]) -> None:
    rules = CutRules(load_spec(assets[name]))
    data = b"def main():\n    return parse(args) + 1\nprint(main())\n"
    cuts = [c for c in range(len(data)) if rules.is_stable(data, c)]
    assert data.index(b" main") in cuts and data.index(b"print") in cuts


def test_no_cut_inside_or_touching_special_token_text(assets: dict[str, Path]) -> None:
    rules = CutRules(load_spec(assets["qwen3"]))
    data = b"a <|im_end|> b\n<|im_start|>user\nok"
    for c in range(len(data)):
        if rules.is_stable(data, c):
            inside = [m for m in (b"<|im_end|>", b"<|im_start|>") if 0 < c - data.find(m) < len(m)]
            assert not inside


def test_stripping_added_tokens_block_nearby_cuts(assets: dict[str, Path], tmp_path: Path) -> None:
    """A token with lstrip/rstrip swallows whitespace of any length: cuts near it are refused,
    and the cuts that remain are still exact."""
    import json

    data = json.loads(assets["qwen3"].read_text(encoding="utf-8"))
    for tok in data["added_tokens"]:
        if tok["content"] == "<tool_call>":
            tok["lstrip"] = tok["rstrip"] = True
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    rules = CutRules(load_spec(path))
    tok = Tokenizer.from_file(str(path))
    text = ("word  " + " " * 300 + "<tool_call>  x  y z\n" + "abc def " * 40) * 2
    assert check_all_cuts(rules, tok, text) > 0
    raw = text.encode()
    assert not rules.is_stable(raw, raw.index(b" <tool_call>"))

    @settings(max_examples=150, deadline=None)
    @given(texts)
    def run(text: str) -> None:
        check_all_cuts(rules, tok, text.replace("<think>", "<tool_call>"))

    run()


def test_trie_pattern_prefers_the_longest_token() -> None:
    import re

    finder = re.compile(b"(?=(" + trie_pattern([b"<a", b"<ab>", b"<abc>", b"b"]) + b"))")
    found = [(m.start(), m.group(1)) for m in finder.finditer(b"x<abc><ab>b<a")]
    assert found == [(1, b"<abc>"), (3, b"b"), (6, b"<ab>"), (8, b"b"), (10, b"b"), (11, b"<a")]


@pytest.mark.parametrize("name", ["qwen3", "llama3", "smollm2", "gpt2", "gemma3"])
def test_window_cuts_are_the_positions_verdicts_in_order(
    name: str, assets: dict[str, Path]
) -> None:
    """A window is searched in blocks from the side the search starts at, each position's
    verdict taken only when the search reaches it (and shared by the added-token edges
    there): its cuts must be, in order, exactly the positions each found stable on its own
    (a block border, or the order verdicts are taken in, changes nothing)."""
    rules = CutRules(load_spec(assets[name]))

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(long_texts, st.data())
    def run(text: str, draw: st.DataObject) -> None:
        data = text.encode("utf-8")
        n = len(data)
        lo, hi = sorted(draw.draw(st.integers(0, n), label="window") for _ in range(2))
        region = (draw.draw(st.integers(0, lo)), draw.draw(st.integers(hi, n)))
        open_ends = (region[0] == 0 and draw.draw(st.booleans()), region[1] == n)
        descending = draw.draw(st.booleans())
        found = list(
            rules.iter_cuts(data, lo, hi, region, open_ends=open_ends, descending=descending)
        )
        alone = [
            c
            for c in range(lo, hi + 1)
            if c in rules.iter_cuts(data, c, c, region, open_ends=open_ends)
        ]
        assert found == (alone[::-1] if descending else alone)

    run()


def test_added_token_occurrences_are_the_longest_at_each_position(assets: dict[str, Path]) -> None:
    guard = CutRules(load_spec(assets["qwen3"]))._guard
    added = [t.content.encode() for t in load_spec(assets["qwen3"]).added_tokens]

    @settings(max_examples=200, deadline=None)
    @given(texts, st.data())
    def run(text: str, draw: st.DataObject) -> None:
        data = text.encode("utf-8")
        lo, hi = sorted(draw.draw(st.integers(0, len(data))) for _ in range(2))
        expected = []
        for p in range(lo, hi):
            fits = [len(t) for t in added if p + len(t) <= hi and data.startswith(t, p)]
            if fits:
                expected.append((p, p + max(fits)))
        assert list(guard.occurrences(data, lo, hi)) == expected

    run()


@pytest.mark.parametrize("name", ["qwen3", "deepseek_v3", "llama3", "gemma3"])
def test_inside_a_token_prefix_is_every_suffix_checked(name: str, assets: dict[str, Path]) -> None:
    """A position "could be inside" an added token exactly when some suffix of the bytes
    before it is a proper prefix of one (the guard finds it with one anchored search)."""
    spec = load_spec(assets[name])
    guard = CutRules(spec)._guard
    added = [t.content.encode() for t in spec.added_tokens if t.content]
    prefixes = {t[:k] for t in added for k in range(1, len(t))}

    @settings(max_examples=150, deadline=None)
    @given(texts)
    def run(text: str) -> None:
        data = text.encode("utf-8")
        for c in range(len(data) + 1):
            expected = any(data[c - k : c] in prefixes for k in range(1, min(guard.longest, c + 1)))
            assert guard._could_be_inside(data, c) == expected, (data, c)

    run()


@pytest.mark.parametrize("name", ["qwen3", "gemma3"])
def test_crossing_occurrences_are_found_from_the_prefixes_before_the_position(
    name: str, assets: dict[str, Path]
) -> None:
    """An added token crosses a position exactly when one of the occurrences around it (the
    longest token at each start) does; the guard looks only where a suffix of the bytes
    before the position is a proper prefix of a token."""
    guard = CutRules(load_spec(assets[name]))._guard

    @settings(max_examples=150, deadline=None)
    @given(texts)
    def run(text: str) -> None:
        data = text.encode("utf-8")
        for c in range(len(data) + 1):
            around = guard.occurrences(data, max(0, c - guard.longest + 1), c + guard.longest)
            expected = any(start < c < end for start, end in around)
            assert guard._crossed(data, c) == expected, (data, c)

    run()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d["model"]["vocab"].__setitem__("x\u2581y", 10**6), "joins 'x' to a space"),
        (lambda d: d["added_tokens"][0].__setitem__("normalized", True), "added tokens matched"),
        (lambda d: d.__setitem__("pre_tokenizer", {"type": "Metaspace"}), "pre-tokenizer"),
    ],
)
def test_gemma_s_rule_is_checked_on_its_vocabulary(
    change: Callable[[dict[str, object]], None], reason: str, assets: dict[str, Path]
) -> None:
    """Gemma's cut holds because no token joins a printable character to a following "▁":
    a file where one does (or whose split or added tokens differ) is refused, with why."""
    import json

    from app.tokenizer_spec import spec_from_json

    data = json.loads(assets["gemma3"].read_text(encoding="utf-8"))
    assert spec_from_json(data).family == "spaces_replaced"
    change(data)
    spec = spec_from_json(data)
    assert spec.family is None and spec.unproven_reason and reason in spec.unproven_reason


def _normalized_added_tokens(assets: dict[str, Path], tmp_path: Path) -> Path:
    """Qwen3's file with its added tokens matched on the normalized text: its guard may then
    trust only ASCII around a position."""
    import json

    data = json.loads(assets["qwen3"].read_text(encoding="utf-8"))
    for tok in data["added_tokens"]:
        tok["normalized"] = True
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", [*FAMILIES, "qwen3 normalized added tokens"])
def test_verdicts_read_nothing_past_the_region(
    name: str, assets: dict[str, Path], tmp_path: Path
) -> None:
    """A repair trusts a cut because its verdict reads only ``text[region]``, the bytes both
    texts share: whatever follows the region, the cuts found must be the same."""
    if name in assets:
        rules = CutRules(load_spec(assets[name]))
    else:
        rules = CutRules(load_spec(_normalized_added_tokens(assets, tmp_path)))
        assert rules._guard._ascii_only

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(long_texts, st.one_of(st.sampled_from(["", "ééé", "<|im_end|>"]), texts), st.data())
    def run(text: str, other: str, draw: st.DataObject) -> None:
        data = text.encode("utf-8")
        end = draw.draw(st.integers(0, len(data)), label="region end")
        lo, hi = sorted(draw.draw(st.integers(0, end), label="window") for _ in range(2))
        start = draw.draw(st.integers(0, lo), label="region start")
        open_ends = (start == 0 and draw.draw(st.booleans()), False)
        found = [
            list(rules.iter_cuts(d, lo, hi, (start, end), open_ends=open_ends))
            for d in (data, data[:end] + other.encode("utf-8"))
        ]
        assert found[0] == found[1], (data, other, (start, end))

    run()
