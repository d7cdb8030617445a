"""The shadow verifier's checks, run in a child process at idle CPU priority.

A check of a 1M-character prompt is ~0.9 s of CPU.  Run in a thread of the proxy it competes
with the request path at the same priority: ``encode_batch`` does the work on a rayon thread,
which a lower priority for the verifier's own thread does not reach, and parsing and comparing
the ids holds the proxy's GIL.  The child (``child_main``) runs under ``SCHED_IDLE`` (nice 19
where that is refused) with one tokenizer thread, so it only takes CPU that nothing else
wants.

It is a plain subprocess speaking pickles over its stdin and stdout, not ``multiprocessing``:
a spawned ``multiprocessing`` child re-runs the parent's main script, which is the user's when
the proxy is embedded in one.  It exits when its stdin closes, so it never outlives the proxy.
It keeps one ``Oracle`` per tokenizer; a tokenizer's JSON crosses over once per child.  A child
that dies (killed, out of memory) is replaced at the next check, and the check it was running
is tried once more in the new one.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import pickle
import subprocess
import sys
import weakref
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import orjson
from tokenizers import Tokenizer

from app.telemetry.checked import CheckedTokenizer
from app.telemetry.oracle import Oracle, first_divergence
from app.tokenization.reference import IdArray

log = logging.getLogger("toksplice.shadow")

Buffer = bytes | bytearray | memoryview

_CLOSE_S = 10.0
"""How long ``close`` waits for the child to finish its check and exit before killing it."""


@dataclass(frozen=True, slots=True)
class Divergence:
    index: int
    """The first id that differs (or where the shorter list ends)."""
    expected: IdArray
    """The reference's ids."""
    actual: IdArray
    """The ids checked."""


@dataclass(frozen=True, slots=True)
class _Check:
    """What precedes a check's bytes on the wire: the text's UTF-8, then the ids checked."""

    key: int
    serialized: str | None
    """The tokenizer's JSON, sent with the first check of it that a child gets."""
    sentinels: dict[str, str] | None
    text_bytes: int
    actual_bytes: int
    is_json: bool
    """The ids checked are the id JSON that went upstream (else int32 bytes)."""


class OracleProcess:
    def __init__(self) -> None:
        self._child: subprocess.Popen[bytes] | None = None
        self._keys: weakref.WeakKeyDictionary[CheckedTokenizer, int] = weakref.WeakKeyDictionary()
        self._next_key = itertools.count()
        self._loaded: set[int] = set()  # keys whose tokenizer the current child holds
        self._killed = False

    @property
    def pid(self) -> int | None:
        """The child's process id, once a check has started it."""
        return None if self._child is None else self._child.pid

    def check(
        self,
        tokenizer: CheckedTokenizer,
        utf8: Buffer,
        sentinels: dict[str, str] | None,
        ids: IdArray,
        sent: Buffer | None,
    ) -> Divergence | None:
        """Compares ``sent`` (the ids' JSON text, when that is what went upstream) or else
        ``ids`` with the reference's ids of the text ``utf8`` holds; blocks until the child
        answers.  None when they are equal."""
        actual = np.ascontiguousarray(ids).view(np.uint8).data if sent is None else sent
        try:
            return self._ask(tokenizer, utf8, sentinels, actual, sent is not None)
        except (EOFError, OSError):
            if self._killed:
                raise
            log.warning("the shadow verifier's child process died; starting another")
            self._stop()
            return self._ask(tokenizer, utf8, sentinels, actual, sent is not None)

    def kill(self) -> None:
        """Cuts a check in flight short (it raises) and starts no other child (any thread)."""
        self._killed = True
        child = self._child
        if child is not None:
            child.kill()

    def close(self) -> None:
        """Stops the child once its check in flight (if any) is done."""
        if self._child is not None:
            self._stop()

    def _ask(
        self,
        tokenizer: CheckedTokenizer,
        utf8: Buffer,
        sentinels: dict[str, str] | None,
        actual: Buffer,
        is_json: bool,
    ) -> Divergence | None:
        if self._killed:
            raise RuntimeError("the shadow verifier's child was stopped")
        child = self._child or self._start()
        assert child.stdin is not None and child.stdout is not None
        key = self._keys.get(tokenizer)
        if key is None:
            key = self._keys[tokenizer] = next(self._next_key)
        serialized = None if key in self._loaded else tokenizer.reference.tokenizer.to_str()
        sizes = memoryview(utf8).nbytes, memoryview(actual).nbytes
        pickle.dump(_Check(key, serialized, sentinels, *sizes, is_json), child.stdin, protocol=5)
        child.stdin.write(utf8)
        child.stdin.write(actual)
        child.stdin.flush()
        answer: Divergence | str | None = pickle.load(child.stdout)
        if isinstance(answer, str):
            raise RuntimeError(f"the shadow verifier's child failed: {answer}")
        self._loaded.add(key)
        return answer

    def _start(self) -> subprocess.Popen[bytes]:
        self._loaded.clear()
        self._child = subprocess.Popen(
            [sys.executable, "-c", f"from {__name__} import child_main; child_main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        log.info("shadow verifier child process started (pid %d)", self._child.pid)
        return self._child

    def _stop(self) -> None:
        child, self._child = self._child, None
        assert child is not None and child.stdin is not None and child.stdout is not None
        with contextlib.suppress(OSError):  # it may be gone already
            child.stdin.close()  # the child's end of input: it exits
        try:
            child.wait(_CLOSE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        child.stdout.close()


def _serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """The child: answers each check with a ``Divergence``, None, or the error's text."""
    oracles: dict[int, Oracle] = {}
    while True:
        try:
            check: _Check = pickle.load(requests)
        except (EOFError, pickle.UnpicklingError):  # the proxy is gone, maybe mid-write
            return
        utf8, actual = requests.read(check.text_bytes), requests.read(check.actual_bytes)
        if len(actual) < check.actual_bytes or len(utf8) < check.text_bytes:
            return
        answer: Any
        try:
            answer = _checked(oracles, check, utf8.decode(), actual)
        except Exception as exc:  # the parent logs it; the child serves on
            answer = f"{type(exc).__name__}: {exc}"
        pickle.dump(answer, answers, protocol=5)
        answers.flush()


def _checked(
    oracles: dict[int, Oracle], check: _Check, text: str, actual: bytes
) -> Divergence | None:
    oracle = oracles.get(check.key)
    if oracle is None:
        assert check.serialized is not None, "the parent sends a tokenizer the child lacks"
        oracle = oracles[check.key] = Oracle(Tokenizer.from_str(check.serialized))
    expected = oracle.ids(text, check.sentinels)
    ids = (
        np.asarray(orjson.loads(b"[" + actual + b"]"), dtype=np.int32)
        if check.is_json
        else np.frombuffer(actual, dtype=np.int32)
    )
    index = first_divergence(expected, ids)
    return None if index is None else Divergence(index, expected, ids)


def child_main() -> None:
    """The child process: idle priority, one tokenizer thread, checks from stdin."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread: the CPU budget counts one core
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # nothing printed may corrupt the answers
    _serve(sys.stdin.buffer, answers)
