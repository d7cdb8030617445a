"""Fixtures of the GPU-path tests: twins of the covered families sharing one class table."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from tokenizers import Tokenizer

from gpu_kernels import TwinEncoder
from gpu_kernels.byte_bpe import IdArray, MergeTable
from gpu_kernels.char_classes import ClassCodes, ClassTable, N
from gpu_kernels.cupy_bpe import SOURCE as BPE_SOURCE
from gpu_kernels.cupy_predicate import SOURCE as PREDICATE_SOURCE
from gpu_kernels.piece_starts import Flags
from gpu_kernels.run_scans import run_offsets, whitespace_starts
from gpu_kernels.twin import MergeStage
from tests.gpu_kernels.host_build import build_for_host

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


HostPredicate = Callable[[ClassCodes, ClassCodes, int], Flags]
"""(classes, folds, digits per piece) -> piece-start flags."""


@pytest.fixture(scope="session")
def host_predicate(tmp_path_factory: pytest.TempPathFactory) -> HostPredicate:
    """The kernel source built for the host, composed with the run scans like the device's."""
    run = build_for_host(PREDICATE_SOURCE, "cl100k_local_starts", tmp_path_factory.mktemp("host"))

    def starts(classes: ClassCodes, folds: ClassCodes, per_piece: int) -> Flags:
        flags = np.zeros(len(classes), dtype=bool)
        if len(classes) == 0:
            return flags
        offsets = np.ascontiguousarray(run_offsets(classes == N, np), dtype=np.int64)
        run(len(classes), classes, folds, offsets, per_piece, len(classes), flags)
        whitespace_starts(classes, flags, np)
        flags[0] = True
        return flags

    return starts


@pytest.fixture(scope="session")
def host_merge(tmp_path_factory: pytest.TempPathFactory) -> MergeStage:
    run = build_for_host(BPE_SOURCE, "bpe_per_piece", tmp_path_factory.mktemp("host"))

    def merge(table: MergeTable, batch: list[bytes]) -> list[IdArray]:
        lengths = np.fromiter(map(len, batch), dtype=np.int64, count=len(batch))
        end = np.cumsum(lengths)
        begin = end - lengths
        tokens = table.byte_ids[np.frombuffer(b"".join(batch), dtype=np.uint8)].copy()
        counts = np.zeros(len(batch), dtype=np.int32)
        keys, ranks, merged = table.pair_keys, table.pair_ranks, table.pair_merged
        run(len(batch), tokens, begin, end, len(batch), keys, ranks, merged, len(keys),
            int(table.width), counts)  # fmt: skip
        return [tokens[b : b + c] for b, c in zip(begin, counts, strict=True)]

    return merge
