"""The shadow verifier's checks, run in a child process at idle CPU priority.

A check of a 1M-character prompt is ~0.9 s of CPU.  Run in a thread of the proxy it competes
with the request path at the same priority: ``encode_batch`` does the work on a rayon thread,
which a lower priority for the verifier's own thread does not reach, and parsing and comparing
the ids holds the proxy's GIL.  The child runs under ``SCHED_IDLE`` (nice 19 where that is
refused), one tokenizer thread, so it only takes CPU that nothing else wants.

The child keeps one ``Oracle`` per tokenizer; a tokenizer's JSON crosses over once per child.
A child that dies (killed, out of memory) is replaced at the next check, and the check it was
running is tried once more in the new one.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import weakref
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np
import orjson
from tokenizers import Tokenizer

from app.telemetry.oracle import Oracle, first_divergence
from app.tokenization import SessionTokenizer
from app.tokenization.reference import IdArray


@dataclass(frozen=True, slots=True)
class Divergence:
    index: int
    """The first id that differs (or where the shorter list ends)."""
    expected: IdArray
    """The reference's ids."""
    actual: IdArray
    """The ids checked."""


class OracleProcess:
    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._keys: weakref.WeakKeyDictionary[SessionTokenizer, int] = weakref.WeakKeyDictionary()
        self._next_key = itertools.count()
        self._loaded: set[int] = set()  # keys whose tokenizer the current child holds

    def check(
        self,
        tokenizer: SessionTokenizer,
        text: str,
        sentinels: dict[str, str] | None,
        ids: IdArray,
        sent: bytes | memoryview | None,
    ) -> Divergence | None:
        """Compares ``sent`` (the ids' JSON text, when that is what went upstream) or else
        ``ids`` with the reference's ids of ``text``; blocks until the child answers.  None
        when they are equal."""
        actual = (bytes(sent), True) if sent is not None else (ids.tobytes(), False)
        try:
            return self._submit(tokenizer, text, sentinels, actual)
        except BrokenProcessPool:
            self._pool = None
            return self._submit(tokenizer, text, sentinels, actual)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _submit(
        self,
        tokenizer: SessionTokenizer,
        text: str,
        sentinels: dict[str, str] | None,
        actual: tuple[bytes, bool],
    ) -> Divergence | None:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")  # no fork of a threaded process
            self._pool = ProcessPoolExecutor(1, context, initializer=_idle_child)
            self._loaded.clear()
        key = self._keys.get(tokenizer)
        if key is None:
            key = self._keys[tokenizer] = next(self._next_key)
        serialized = None if key in self._loaded else tokenizer.reference.tokenizer.to_str()
        future = self._pool.submit(_check_in_child, key, serialized, text, sentinels, *actual)
        divergence = future.result()
        self._loaded.add(key)
        return divergence


_ORACLES: dict[int, Oracle] = {}
"""In the child: key -> the oracle of that tokenizer."""


def _idle_child() -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread: the CPU budget counts one core
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


def _check_in_child(
    key: int, serialized: str | None, text: str, sentinels: dict[str, str] | None,
    actual: bytes, is_json: bool,
) -> Divergence | None:  # fmt: skip
    oracle = _ORACLES.get(key)
    if oracle is None:
        assert serialized is not None, "the parent sends a tokenizer the child has not seen"
        oracle = _ORACLES[key] = Oracle(Tokenizer.from_str(serialized))
    expected = oracle.ids(text, sentinels)
    ids = (
        np.asarray(orjson.loads(b"[" + actual + b"]"), dtype=np.int32)
        if is_json
        else np.frombuffer(actual, dtype=np.int32)
    )
    index = first_divergence(expected, ids)
    return None if index is None else Divergence(index, expected, ids)
