"""Fixtures of the GPU-path tests: twins of the covered families sharing one class table, and
the kernels built for the host."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from gpu_kernels import TwinEncoder, is_available, unavailable_reason
from gpu_kernels.byte_bpe import MergeTable
from gpu_kernels.char_classes import ClassTable
from gpu_kernels.cuda_source import SOURCE
from tests.adversarial import long_texts, texts
from tests.gpu_kernels.host_build import HostBackend

FAMILIES = {
    "qwen3": "qwen2", "llama3": "cl100k", "cl100k": "cl100k", "gpt2": "gpt2", "o200k": "o200k",
    "deepseek_v3": "deepseek_v3",
}  # fmt: skip
"""The assets the twin covers, with their pre-tokenizer family (``app.tokenizer_spec``)."""

on_gpu = pytest.mark.skipif(not is_available(), reason=f"no GPU path: {unavailable_reason()}")

_SPECIALS = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>",
    "<|endofprompt|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>",
    "｜DSML｜", "<｜/table>｜", "</think>",
]  # fmt: skip
"""Added tokens of the covered vocabularies (each is plain text where its vocabulary lacks it):
DeepSeek-V3's normalized ``<｜User｜>``, ``｜DSML｜`` and ``</think>`` next to its raw ones."""

_CASE_TRAPS = "aZǅʰ中\u0301\u0300 \n'(/.1sSlLdD"
"""o200k's case classes (Ll, Lu, Lt, Lm, Lo, Mn), contraction letters, and what ends or
carries on a piece: `'` (contraction or prefix), `/` (absorbed after newlines, or not)."""

_SEGMENT_TRAPS = "aZé\u0301 \n\t'(.«$1²中あ゜ー\x01\u200d"

case_texts = st.lists(
    st.one_of(
        st.text(alphabet=_CASE_TRAPS, max_size=12),
        st.sampled_from(["HTTPServer", "McDonald's", "I'LL", "ÀÉÎ", "A\u0301B\u0301c", "ǅx"]),
        st.sampled_from(["(\u0301\n/", "'\u0301", " '", "\u02b0A", "中A", "<|endoftext|>"]),
        st.text(alphabet=_SEGMENT_TRAPS, max_size=12),
        st.sampled_from(["(abcé", "((abc", " (abc", "゜は", "a  123", "1234中", "<｜User｜>"]),
    ),
    max_size=10,
).map("".join)
"""o200k's traps: words split by case, marks that are letters or punctuation, contractions as
word suffixes, ``[\\r\\n/]*`` after punctuation; DeepSeek-V3's: digit groups and CJK runs
as segments, a lone ASCII punctuation character taking ASCII letters, characters no class
takes; added tokens next to them."""

spliced_texts = st.lists(
    st.one_of(
        texts,
        st.sampled_from(_SPECIALS),
        st.sampled_from([" ", "  ", "\n", " \n ", "\t", "'s", "'RE", "1234", "a", "é", "..."]),
    ),
    max_size=10,
).map("".join)
"""Added tokens next to what the predicate decides near a stretch's ends: whitespace runs
(handed on, or not, at the end), contractions, digit groups, letters after punctuation."""

adversarial = st.one_of(texts, long_texts, spliced_texts, case_texts)


def differential(examples: int) -> settings:
    """Hypothesis settings of these tests (session fixtures, no deadline: the engine warms up)."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


@pytest.fixture(scope="session")
def class_table() -> ClassTable:
    return ClassTable()


@pytest.fixture(scope="session")
def twin(
    reference: Callable[[str], Tokenizer], class_table: ClassTable
) -> Callable[[str], TwinEncoder]:
    """``name -> TwinEncoder`` of that asset, built once per test session."""
    return functools.cache(lambda name: TwinEncoder(reference(name), classes=class_table))


@pytest.fixture(scope="session")
def merge_table(reference: Callable[[str], Tokenizer]) -> Callable[[str], MergeTable]:
    """``name -> MergeTable`` of that asset's BPE model, built once per test session."""
    return functools.cache(lambda name: MergeTable(json.loads(reference(name).to_str())["model"]))


@pytest.fixture(scope="session")
def host_backend(tmp_path_factory: pytest.TempPathFactory) -> HostBackend:
    """``kernels.cu`` built for the host: the device stages run by NumPy and g++."""
    return HostBackend(SOURCE, tmp_path_factory.mktemp("host"))
