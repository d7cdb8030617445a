"""The device's whole-word lookup (``ignore_merges``): the hash table and its kernel find
exactly the vocabulary's words, on Llama-3 (the covered vocabulary that sets the flag)."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

from gpu_kernels.backend import Backend, CupyBackend, per_item
from gpu_kernels.byte_bpe import MergeTable
from gpu_kernels.whole_words import WholeWords
from tests.gpu_kernels.conftest import on_gpu


@pytest.fixture(scope="module")
def words(merge_table: Callable[[str], MergeTable]) -> dict[bytes, int]:
    table = merge_table("llama3")
    assert table.ignore_merges
    return table.words


def _probes(words: dict[bytes, int]) -> list[bytes]:
    """Every word, and as many near misses: a byte more or less, or one changed."""
    rng = random.Random(7)
    misses = []
    for word in rng.sample(sorted(words), 20_000):
        misses += [word + b"x", word[:-1], bytes([word[0] ^ 1]) + word[1:]]
    return [*words, *(m for m in misses if len(m) > 1)]


def test_table_lookup_equals_the_vocabulary(words: dict[bytes, int]) -> None:
    table = WholeWords(words)
    assert all(table.lookup(piece) == words.get(piece) for piece in _probes(words))


def _kernel_lookup(backend: Backend, table: WholeWords, pieces: list[bytes]) -> list[int | None]:
    xp = backend.xp
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    end = np.cumsum(lengths)
    data = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    tokens = xp.full(len(data), -1, dtype=xp.int32)
    counts = xp.zeros(len(pieces), dtype=xp.int32)
    done = xp.zeros(len(pieces), dtype=xp.uint8)
    per_item(backend, "whole_words", len(pieces), xp.asarray(data), xp.asarray(end - lengths),
             xp.asarray(end), np.int64(len(pieces)), xp.asarray(table.slots),
             np.int64(table.mask), xp.asarray(table.bytes), xp.asarray(table.at),
             xp.asarray(table.ids), np.int64(table.max_len), tokens, counts, done)  # fmt: skip
    found, first = backend.to_host(done), backend.to_host(tokens)[end - lengths]
    return [int(i) if hit else None for hit, i in zip(found, first, strict=True)]


def test_host_build_of_the_kernel(words: dict[bytes, int], host_backend: Backend) -> None:
    probes = [p for p in _probes(words) if len(p) > 1]
    got = _kernel_lookup(host_backend, WholeWords(words), probes)
    assert got == [words.get(piece) for piece in probes]


@pytest.mark.gpu
@on_gpu
def test_device_kernel(words: dict[bytes, int]) -> None:
    probes = [p for p in _probes(words) if len(p) > 1]
    got = _kernel_lookup(CupyBackend(), WholeWords(words), probes)
    assert got == [words.get(piece) for piece in probes]
