"""Long texts encoded in the reference encoder's child process: the same ids and ends as HF
``tokenizers`` and the in-thread path, and a child that dies costs no request its answer."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from app.tokenization import reference_process
from app.tokenization.reference import IdArray, OffsetArray, ReferenceEncoder

NAMES = ["smollm2", "mistral_v3"]
"""A byte-level vocabulary (ends from the tokens' lengths) and a SentencePiece one, with no
proven cuts (ends from the engine's offsets)."""
THRESHOLD = 8
"""Texts of at least this many characters go to the child in these tests."""


@pytest.fixture(scope="module")
def encoders(
    reference: Callable[[str], Tokenizer],
) -> Iterator[dict[str, tuple[ReferenceEncoder, ReferenceEncoder]]]:
    """Per tokenizer: (the in-thread encoder, one that sends texts of ``THRESHOLD``
    characters or more to its child)."""
    found = {
        name: (
            ReferenceEncoder(reference(name), process_chars=None),
            ReferenceEncoder(reference(name), process_chars=THRESHOLD),
        )
        for name in NAMES
    }
    yield found
    reference_process.close_all()


def _check(
    tokenizer: Tokenizer,
    here: ReferenceEncoder,
    texts: list[str],
    found: list[tuple[IdArray, OffsetArray]],
) -> None:
    for text, (ids, ends), (here_ids, here_ends) in zip(
        texts, found, here.encode_many(texts), strict=True
    ):
        assert ids.tolist() == tokenizer.encode(text, add_special_tokens=False).ids
        assert ids.dtype == ends.dtype == np.int32
        assert np.array_equal(ids, here_ids) and np.array_equal(ends, here_ends)


TEXTS = st.lists(
    st.sampled_from(
        ["a", " ", "\n", "\u00e9", "e\u0301", "数", "🙂", "<s>", "[INST]", "12", "\t", "ß"]
    ),
    max_size=40,
).map("".join)


@pytest.mark.parametrize("name", NAMES)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(TEXTS, min_size=1, max_size=4))
def test_child_encodes_equal_the_reference(
    encoders: dict[str, tuple[ReferenceEncoder, ReferenceEncoder]],
    reference: Callable[[str], Tokenizer],
    name: str,
    texts: list[str],
) -> None:
    """Batches mixing texts under and over the threshold, in any order."""
    here, far = encoders[name]
    _check(reference(name), here, texts, far.encode_many(texts))


@pytest.mark.parametrize("name", NAMES)
def test_a_dead_child_falls_back_and_is_replaced(
    encoders: dict[str, tuple[ReferenceEncoder, ReferenceEncoder]],
    reference: Callable[[str], Tokenizer],
    name: str,
) -> None:
    here, far = encoders[name]
    process = far._process
    assert process is not None
    texts = ["héllo wörld, " * 50, "short"]
    _check(reference(name), here, texts, far.encode_many(texts))
    first = process.pid
    assert first is not None
    os.kill(first, 9)
    _check(reference(name), here, texts, far.encode_many(texts))  # encoded in-thread
    assert process.pid is None
    _check(reference(name), here, texts, far.encode_many(texts))
    assert process.pid not in (None, first)


def test_a_child_killed_mid_encode_falls_back(
    encoders: dict[str, tuple[ReferenceEncoder, ReferenceEncoder]],
    reference: Callable[[str], Tokenizer],
) -> None:
    here, far = encoders["smollm2"]
    process = far._process
    assert process is not None
    far.encode("warm up the child")
    pid = process.pid
    assert pid is not None
    texts = ["a" * 3_000_000 + " b"]
    found: list[list[tuple[IdArray, OffsetArray]]] = []
    encoding = threading.Thread(target=lambda: found.append(far.encode_many(texts)))
    encoding.start()
    time.sleep(0.2)  # the child is at its encode (or done: the answer must be right either way)
    os.kill(pid, 9)
    encoding.join()
    _check(reference("smollm2"), here, texts, found[0])


def test_close_all_stops_the_children(
    encoders: dict[str, tuple[ReferenceEncoder, ReferenceEncoder]],
) -> None:
    _, far = encoders["smollm2"]
    assert far._process is not None
    far.encode("start the child")
    pid = far._process.pid
    assert pid is not None
    reference_process.close_all()
    assert far._process.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
