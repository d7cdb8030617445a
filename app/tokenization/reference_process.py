"""Long one-piece reference encodes in a child process, so the proxy's GIL stays free.

HF ``tokenizers`` encodes without the GIL, but reading a text's ids back (``Encoding.ids``,
one list, ~25-40 ns a token) and freeing its encoding hold it in one step each: for
``'a' * 10_000_000`` (2.5M tokens) ~60-85 ms during which the event loop answers no one,
growing with the text.  ``ReferenceEncoder`` therefore hands a text of at least
``PROCESS_CHARS`` characters to a child running the same ``ReferenceEncoder`` code (its
tokenizer built once from the parent's JSON).  The ids and ends come back as raw int32 bytes,
read from the pipe straight into arrays, so the parent holds the GIL only for copies.

Like the shadow verifier's child, it is a plain subprocess speaking over its stdin and stdout
(not ``multiprocessing``, whose spawned child re-runs the parent's main script, and never a
fork of a process running threads), started on first use; it exits when its stdin closes.  A
child that dies (killed, out of memory) fails its call with ``ReferenceProcessLost``: the
caller encodes in-thread instead, and the next call starts a fresh child.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import subprocess
import sys
import threading
import weakref
from collections.abc import Sequence
from typing import IO

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from app import stdio_child

log = logging.getLogger("toksplice")

PROCESS_CHARS = 1 << 20
"""Texts of at least this many characters go to the child: from about there the in-thread
path holds the GIL longer than the round trip through the child does (measured on 2 cores,
``loadtest/reference_process_cost.py``: 1M characters ~4 ms in-thread against ~2-3.5 through
the child, 4M ~22 ms against ~4; under 1M the child saves nothing)."""
_COUNT = struct.Struct("<q")

Int32s = npt.NDArray[np.int32]


class ReferenceProcessLost(Exception):
    """The child died before answering; the call's texts were not encoded."""


class ReferenceProcess:
    """A child process encoding with ``tokenizer`` (sent as its JSON when the child starts:
    megabytes not held by every encoder that never starts one); one call at a time."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        _LIVE.add(self)

    @property
    def pid(self) -> int | None:
        """The child's process id while one runs."""
        return None if self._child is None else self._child.pid

    def encode_many(self, texts: Sequence[str]) -> list[tuple[Int32s, Int32s]]:
        """``ReferenceEncoder.encode_many(texts)``, computed in the child (started if none
        runs); raises ``ReferenceProcessLost`` when the child dies meanwhile."""
        with self._lock:
            child = self._child or self._start()
            assert child.stdin is not None and child.stdout is not None
            try:
                _send(child.stdin, [text.encode("utf-8") for text in texts])
                return [_arrays(child.stdout) for _ in texts]
            except (OSError, EOFError):
                log.warning("the reference encoder's child process died; encoding in-thread")
                self._stop(kill=True)
                raise ReferenceProcessLost("the reference encoder's child process died") from None

    def close(self) -> None:
        """Stops the child once its encode in flight (if any) is done."""
        with self._lock:
            if self._child is not None:
                self._stop(kill=False)

    def _start(self) -> subprocess.Popen[bytes]:
        child = self._child = stdio_child.start(__name__)
        assert child.stdin is not None
        with contextlib.suppress(OSError):  # a child gone at once fails the call that follows
            _send(child.stdin, [self._tokenizer.to_str().encode("utf-8")])
        log.info("reference encoder child process started (pid %d)", child.pid)
        return child

    def _stop(self, *, kill: bool) -> None:
        child, self._child = self._child, None
        assert child is not None
        stdio_child.stop(child, kill=kill)


_LIVE: weakref.WeakSet[ReferenceProcess] = weakref.WeakSet()


def close_all() -> None:
    """Stops every child process (the proxy's shutdown)."""
    for process in list(_LIVE):
        process.close()


def _send(stream: IO[bytes], blobs: Sequence[bytes]) -> None:
    """A count, then each blob as its byte length and its bytes."""
    stream.write(_COUNT.pack(len(blobs)))
    for blob in blobs:
        stream.write(_COUNT.pack(len(blob)))
        stream.write(blob)
    stream.flush()


def _received(stream: IO[bytes]) -> list[bytes] | None:
    """What ``_send`` sent; None at the end of the stream (the sender is gone)."""
    head = stream.read(_COUNT.size)
    if len(head) < _COUNT.size:
        return None
    blobs = []
    for _ in range(_COUNT.unpack(head)[0]):
        size = stream.read(_COUNT.size)
        blob = stream.read(_COUNT.unpack(size)[0]) if len(size) == _COUNT.size else b""
        if len(size) < _COUNT.size or len(blob) < _COUNT.unpack(size)[0]:
            return None
        blobs.append(blob)
    return blobs


def _arrays(stream: IO[bytes]) -> tuple[Int32s, Int32s]:
    """One text's ids and ends: the token count, then both arrays' bytes, each read into its
    array in place (the reads release the GIL)."""
    head = stream.read(_COUNT.size)
    if len(head) < _COUNT.size:
        raise EOFError
    count = _COUNT.unpack(head)[0]
    ids, ends = np.empty(count, dtype=np.int32), np.empty(count, dtype=np.int32)
    for array in (ids, ends):
        view = array.data.cast("B")
        while len(view):
            got = stream.readinto(view)  # type: ignore[attr-defined]
            if not got:
                raise EOFError
            view = view[got:]
    return ids, ends


def child_main() -> None:
    """The child: the tokenizer's JSON, then lists of texts from stdin, answered in order."""
    from app.tokenization.reference import ReferenceEncoder

    requests = sys.stdin.buffer
    answers = open(sys.stdout.fileno(), "wb", closefd=False)  # noqa: SIM115
    sys.stdout = sys.stderr  # nothing printed may corrupt the answers
    loaded = _received(requests)
    if not loaded:
        return
    encoder = ReferenceEncoder(Tokenizer.from_str(loaded[0].decode("utf-8")), process_chars=None)
    while (texts := _received(requests)) is not None:
        for ids, ends in encoder.encode_many([text.decode("utf-8") for text in texts]):
            answers.write(_COUNT.pack(len(ids)))
            answers.write(ids.data.cast("B"))
            answers.write(ends.data.cast("B"))
        answers.flush()
