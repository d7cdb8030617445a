"""One leftmost-longest pass over all added tokens (``AddedSplit``) against HF's two passes
(non-normalized tokens first, then normalized ones): equal whenever ``two_pass_conflict``
finds nothing, and the conflicts it reports are real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer, models

from app.tokenizer_spec import AddedToken as Added
from gpu_kernels.payload import AddedSplit
from gpu_kernels.plan import EncoderPlan, UnsupportedTokenizer, two_pass_conflict
from tests.gpu_kernels.conftest import differential

_ALPHABET = "ab<|"
tokens = st.dictionaries(
    st.text(alphabet=_ALPHABET, min_size=1, max_size=4), st.booleans(), min_size=1, max_size=5
)
"""Added tokens (content -> normalized), from a small alphabet so that they overlap often."""


def hf_spans(added: dict[str, bool], text: str) -> list[tuple[int, int]]:
    """Where HF matches added tokens in ``text`` (a model that knows no other token), in
    bytes."""
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.add_tokens([AddedToken(c, normalized=n) for c, n in added.items()])
    encoding = tokenizer.encode(text, add_special_tokens=False)
    spans = [o for t, o in zip(encoding.tokens, encoding.offsets, strict=True) if t in added]
    return [(len(text[:b].encode()), len(text[:e].encode())) for b, e in spans]


def one_pass_spans(added: dict[str, bool], text: str) -> list[tuple[int, int]]:
    split = AddedSplit({c: k for k, c in enumerate(added)}, None, None)
    payload = split.payload(text)
    return list(zip(payload.span_begin.tolist(), payload.span_end.tolist(), strict=True))


def conflict(added: dict[str, bool]) -> str | None:
    flagged = [Added(c, False, False, False, n) for c, n in added.items()]
    return two_pass_conflict(flagged, identity=True)


@differential(500)
@given(added=tokens, data=st.data())
def test_one_pass_is_hfs_two_where_no_conflict_is_found(
    added: dict[str, bool], data: st.DataObject
) -> None:
    parts = st.one_of(st.sampled_from(sorted(added)), st.text(alphabet=_ALPHABET, max_size=3))
    text = "".join(data.draw(st.lists(parts, max_size=8)))  # tokens run into each other
    if conflict(added) is None:
        assert one_pass_spans(added, text) == hf_spans(added, text)


@pytest.mark.parametrize(
    ("added", "text"),
    [
        ({"<|b": False, "Q<": True}, "Q<|b"),  # a normalized token ends with a raw one's start
        ({"<|": False, "a<|b": True}, "a<|b"),  # a normalized token holds a raw one
        ({"<|": False, "<|b": True}, "<|b"),  # ... or starts with one
    ],
)
def test_each_reported_conflict_is_real(added: dict[str, bool], text: str) -> None:
    assert conflict(added) is not None
    assert one_pass_spans(added, text) != hf_spans(added, text)


@pytest.mark.parametrize(
    ("added", "text"),
    [  # DeepSeek-V3 has the first: ``<｜/table>｜`` (raw) and ``｜DSML｜`` (normalized)
        ({"<｜/table>｜": False, "｜DSML｜": True}, "<｜/table>｜DSML｜ ｜DSML｜<｜/table>｜"),
        ({"a<|b": False, "<|": True}, "<|a<|b<|"),
    ],
)
def test_a_raw_token_holding_or_ending_with_a_normalized_ones_start_is_no_conflict(
    added: dict[str, bool], text: str
) -> None:
    assert conflict(added) is None
    assert one_pass_spans(added, text) == hf_spans(added, text)


def test_normalized_tokens_under_a_normalizer_are_refused(assets: dict[str, Path]) -> None:
    document = json.loads(Tokenizer.from_file(str(assets["deepseek_v3"])).to_str())
    document["normalizer"] = {"type": "NFC"}
    with pytest.raises(UnsupportedTokenizer, match="under a normalizer"):
        EncoderPlan(Tokenizer.from_str(json.dumps(document)))
