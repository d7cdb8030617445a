"""Fixtures of the GPU-path tests: twins of the covered families sharing one class table."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, settings
from tokenizers import Tokenizer

from gpu_kernels import TwinEncoder
from gpu_kernels.byte_bpe import MergeTable
from gpu_kernels.char_classes import ClassTable

FAMILIES = {"qwen3": "qwen2", "llama3": "cl100k", "cl100k": "cl100k", "gpt2": "gpt2"}
"""The assets the twin covers, with their pre-tokenizer family (``app.tokenization.spec``)."""


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
