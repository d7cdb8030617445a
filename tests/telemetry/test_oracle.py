"""The shadow verifier's oracle against independent constructions of the ids contract."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.rendering import ChatTemplate
from app.sessions.typed_specials import TypedSpecials
from app.telemetry.oracle import Oracle, first_divergence
from tests.adversarial import grown_texts
from tests.tokenization.test_typed_specials import CHATML, _oracle, contents

FAMILIES = ["qwen3", "llama3", "deepseek_v3", "gpt2", "cl100k", "o200k", "smollm2"]


@pytest.fixture(scope="module")
def qwen(assets: dict[str, Path]) -> Tokenizer:
    return Tokenizer.from_file(str(assets["qwen3"]))


@pytest.fixture(scope="module")
def plain(qwen: Tokenizer) -> Tokenizer:
    tok = Tokenizer.from_str(qwen.to_str())
    tok.encode_special_tokens = True
    return tok


@pytest.fixture(scope="module")
def oracle(qwen: Tokenizer) -> Oracle:
    return Oracle(qwen)


@pytest.fixture(scope="module")
def typed(qwen: Tokenizer) -> TypedSpecials:
    return TypedSpecials(qwen)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "tool"]), contents), min_size=1, max_size=4
    )
)
def test_pieces_contract_matches_the_transcript_built_piece_by_piece(
    qwen: Tokenizer,
    plain: Tokenizer,
    oracle: Oracle,
    typed: TypedSpecials,
    turns: list[tuple[str, str]],
) -> None:
    """Special-token text in content is text; the template's specials are specials."""
    messages = [{"role": r, "content": c} for r, c in turns]
    masked = typed.mask(messages, None)
    template = ChatTemplate(CHATML)
    if masked is None:
        ids = oracle.ids(template.render(messages))
    else:
        ids = oracle.ids(template.render(masked.messages), masked.tokens)
    assert ids.tolist() == _oracle(qwen, plain, messages)


@pytest.mark.parametrize("name", FAMILIES)
def test_plain_contract_is_the_reference_encode(
    name: str, reference: Callable[[str], Tokenizer]
) -> None:
    tok = reference(name)
    oracle = Oracle(tok)

    @settings(max_examples=20, deadline=None)
    @given(grown_texts())
    def run(versions: list[str]) -> None:
        for text in versions:
            assert oracle.ids(text).tolist() == tok.encode(text, add_special_tokens=False).ids

    run()


ids_arrays = st.lists(st.integers(0, 1000), max_size=50).map(lambda v: np.asarray(v, np.int32))


@given(ids_arrays, st.data())
def test_first_divergence_finds_the_first_changed_id(base: np.ndarray, data: st.DataObject) -> None:
    assert first_divergence(base, base.copy()) is None
    k = data.draw(st.integers(0, len(base)))
    change = data.draw(st.sampled_from(["substitute", "truncate", "insert"]))
    if change == "substitute" and k < len(base):
        other = base.copy()
        other[k] = base[k] + 1
    elif change == "insert":
        other = np.insert(base, k, -1)
    else:
        other = base[:k]
        if k == len(base):
            assert first_divergence(base, other) is None
            return
    assert first_divergence(base, other) == k
    assert first_divergence(other, base) == k
