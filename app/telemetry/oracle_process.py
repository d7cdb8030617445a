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
It keeps one ``Oracle`` per tokenizer and one chat template per template; each crosses over
once per child.  A check's template inputs, when it has them, are looked at by the child too
(``oracle_source``): that walk and render of a 1M-character prompt is ~7 ms of Python without
special-token text and ~90 ms with it, which in a thread of the proxy would hold the GIL that
long, stalling requests in 5 ms slices.  A child that dies (killed, out of memory) is replaced
at the next check, and the check it was running is tried once more in the new one.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import re
import subprocess
import sys
import weakref
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import orjson
from tokenizers import Tokenizer

from app import stdio_child
from app.telemetry.checked import CheckedTokenizer
from app.telemetry.oracle import Oracle, first_divergence
from app.telemetry.oracle_source import RenderSource, Template, oracle_prompt, special_pattern
from app.tokenization.reference import IdArray

log = logging.getLogger("toksplice.shadow")

Buffer = bytes | bytearray | memoryview


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
    inputs: _Inputs | None
    """The template inputs the text was rendered from, before masking (``RenderSource``)."""
    text_bytes: int
    actual_bytes: int
    is_json: bool
    """The ids checked are the id JSON that went upstream (else int32 bytes)."""


@dataclass(frozen=True, slots=True)
class _Inputs:
    """A ``RenderSource`` on the wire: its template by key, sent once per child."""

    template_key: int
    template: bytes | None
    """The pickled template, sent with the first check of it that a child gets."""
    messages: Any
    tools: Any
    template_kwargs: Any
    add_generation_prompt: bool


class OracleProcess:
    def __init__(self) -> None:
        self._child: subprocess.Popen[bytes] | None = None
        self._keys: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        """Tokenizers and templates, each by the key the child holds it under."""
        self._next_key = itertools.count()
        self._loaded: set[int] = set()  # keys the current child holds
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
        source: RenderSource | None = None,
    ) -> Divergence | None:
        """Compares ``sent`` (the ids' JSON text, when that is what went upstream) or else
        ``ids`` with the reference's ids of the text the child finds (``_expected_input``)
        from ``source``, ``utf8`` and ``sentinels``; blocks until the child answers.  None
        when they are equal.  The template of ``source`` must pickle."""
        actual = np.ascontiguousarray(ids).view(np.uint8).data if sent is None else sent
        try:
            return self._ask(tokenizer, utf8, sentinels, actual, sent is not None, source)
        except (EOFError, OSError):
            if self._killed:
                raise
            log.warning("the shadow verifier's child process died; starting another")
            self._stop()
            return self._ask(tokenizer, utf8, sentinels, actual, sent is not None, source)

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
        source: RenderSource | None,
    ) -> Divergence | None:
        if self._killed:
            raise RuntimeError("the shadow verifier's child was stopped")
        child = self._child or self._start()
        assert child.stdin is not None and child.stdout is not None
        key = self._key(tokenizer)
        serialized = None if key in self._loaded else tokenizer.reference.tokenizer.to_str()
        inputs = None
        if source is not None:
            template_key = self._key(source.template)
            template = None if template_key in self._loaded else pickle.dumps(source.template)
            inputs = _Inputs(
                template_key, template, source.messages, source.tools, source.template_kwargs,
                source.add_generation_prompt,
            )  # fmt: skip
        sizes = memoryview(utf8).nbytes, memoryview(actual).nbytes
        check = _Check(key, serialized, sentinels, inputs, *sizes, is_json)
        pickle.dump(check, child.stdin, protocol=5)
        child.stdin.write(utf8)
        child.stdin.write(actual)
        child.stdin.flush()
        answer: Divergence | str | None = pickle.load(child.stdout)
        if isinstance(answer, str):
            raise RuntimeError(f"the shadow verifier's child failed: {answer}")
        self._loaded.add(key)
        if inputs is not None:
            self._loaded.add(inputs.template_key)
        return answer

    def _key(self, held: object) -> int:
        key = self._keys.get(held)
        if key is None:
            key = self._keys[held] = next(self._next_key)
        return key

    def _start(self) -> subprocess.Popen[bytes]:
        self._loaded.clear()
        self._child = stdio_child.start(__name__)
        log.info("shadow verifier child process started (pid %d)", self._child.pid)
        return self._child

    def _stop(self) -> None:
        child, self._child = self._child, None
        assert child is not None
        stdio_child.stop(child)


@dataclass
class _Held:
    """What a child keeps between checks, by the parent's keys."""

    oracles: dict[int, tuple[Oracle, re.Pattern[str] | None]] = field(default_factory=dict)
    """Each tokenizer's oracle and pattern of special tokens (``special_pattern``)."""
    templates: dict[int, Template] = field(default_factory=dict)


def _serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """The child: answers each check with a ``Divergence``, None, or the error's text."""
    held = _Held()
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
            answer = _checked(held, check, utf8.decode(), actual)
        except Exception as exc:  # the parent logs it; the child serves on
            answer = f"{type(exc).__name__}: {exc}"
        pickle.dump(answer, answers, protocol=5)
        answers.flush()


def _checked(held: _Held, check: _Check, text: str, actual: bytes) -> Divergence | None:
    known = held.oracles.get(check.key)
    if known is None:
        assert check.serialized is not None, "the parent sends a tokenizer the child lacks"
        tokenizer = Tokenizer.from_str(check.serialized)
        known = held.oracles[check.key] = Oracle(tokenizer), special_pattern(tokenizer)
    oracle, specials = known
    expected = oracle.ids(*_expected_input(held, check, text, specials))
    ids = (
        np.asarray(orjson.loads(b"[" + actual + b"]"), dtype=np.int32)
        if check.is_json
        else np.frombuffer(actual, dtype=np.int32)
    )
    index = first_divergence(expected, ids)
    return None if index is None else Divergence(index, expected, ids)


def _expected_input(
    held: _Held, check: _Check, text: str, specials: re.Pattern[str] | None
) -> tuple[str, dict[str, str] | None]:
    """The text the ids must encode and its markers: from the unmasked template inputs when
    the check has them (``oracle_source``): the proxy's rendered text when no client string
    holds special-token text and the proxy masked nothing, else a render of the verifier's
    own; without inputs, the proxy's text and markers."""
    inputs = check.inputs
    if inputs is None:
        return text, check.sentinels
    template = held.templates.get(inputs.template_key)
    if template is None:
        assert inputs.template is not None, "the parent sends a template the child lacks"
        template = held.templates[inputs.template_key] = pickle.loads(inputs.template)
    source = RenderSource(
        template, inputs.messages, inputs.tools, inputs.template_kwargs,
        inputs.add_generation_prompt,
    )  # fmt: skip
    own = oracle_prompt(source, specials)
    if own is not None:
        return own
    if check.sentinels is not None:  # masked, though nothing needed it
        return source.render(), None
    return text, None


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
