"""The shadow verifier: re-encodes a sample of prompts with the reference, off the request path.

``draw`` (on the request path) costs one random draw; a sampled request's prompt is copied
into one of ``shadow_queue`` reused buffers once its ids are on their way upstream: when none
is free the check is dropped and counted, never waited for.  A worker thread hands each check
to a child process at idle priority (``oracle_process``), which computes the ids the prompt
must have (``oracle``) and compares; the worker rests between checks so that they use at most
``shadow_cpu`` of a core.  On a divergence: the metric, one structured log line (no content),
a reproduction written to ``shadow_repro_dir`` (it holds the prompt text), the session's
stored state forgotten so its next call encodes in full, and with
``shadow_disable_on_divergence`` repair switched off for the tokenizer until restart.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import queue
import random
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from app.config import Settings
from app.pieced_text import PiecedText, write_utf8
from app.telemetry.checked import CheckedTokenizer, Repairing, Sentinels
from app.telemetry.metrics import Metrics
from app.telemetry.oracle_process import OracleProcess
from app.telemetry.oracle_source import RenderSource
from app.tokenization import Encoding
from app.tokenization.engines import EngineRun, engine_at
from app.tokenization.reference import IdArray

log = logging.getLogger("toksplice.shadow")

_CONTEXT = 8
"""Ids shown either side of the first divergence in a reproduction."""


@dataclass(frozen=True, slots=True)
class ShadowJob:
    tokenizer: CheckedTokenizer
    session: str
    utf8: bytearray
    """The rendered prompt's UTF-8 (for route "pieces": with user-typed specials masked), in
    a buffer of the verifier's own: holding the prompt itself until its check slowed every
    call at 1M characters by ~2.5 ms (measured with the checks replaced by a sleep), memory
    the allocator could not reuse for the next, slightly longer prompt."""
    sentinels: dict[str, str] | None
    ids: IdArray
    route: str
    typed: Repairing | None
    """Where route "pieces" keeps its session state."""
    sent: bytes | memoryview | None
    """The ids as the JSON text that went upstream (spliced from earlier calls' text): the
    ids checked are these, what the upstream got."""
    source: RenderSource | None = None
    """The template inputs before masking: the check (in the verifier's child process) finds
    special-token text in them by itself (``oracle_source``) rather than trusting the masking
    it checks."""
    engines: tuple[EngineRun, ...] = ()
    """Which engine gave which ids (``Encoding.engines``): a divergence names the one that
    gave the first wrong id."""

    @property
    def text(self) -> str:
        return self.utf8.decode()


class ShadowVerifier:
    def __init__(
        self, settings: Settings, metrics: Metrics, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        """``clock`` times the checks (for the rests between them)."""
        self._clock = clock
        self._rate = settings.shadow_rate
        self._rest_per_busy = 1 / settings.shadow_cpu - 1
        self._closing = threading.Event()
        self._abandon = threading.Event()
        self._repro_dir = settings.shadow_repro_dir
        self._repro_made: Path | None = None  # worker thread only
        self._disable_on_divergence = settings.shadow_disable_on_divergence
        self._metrics = metrics
        self._random = random.Random()
        self._jobs: queue.Queue[ShadowJob | None] = queue.Queue()
        self._buffers: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
        for _ in range(settings.shadow_queue):  # one per pending check, reused
            self._buffers.put(bytearray())
        self._oracle = OracleProcess()  # worker thread only
        self._worker = threading.Thread(target=self._run, name="toksplice-shadow", daemon=True)
        if self._rate > 0:
            self._worker.start()

    def draw(
        self,
        tokenizer: CheckedTokenizer,
        session: str,
        text: str | PiecedText,
        encoding: Encoding,
        masked: Sentinels | None,
        typed: Repairing | None = None,
        sent: bytes | memoryview | None = None,
        source: RenderSource | None = None,
    ) -> Callable[[], None] | None:
        """Samples this request for a check (one random draw); for a drawn one, the call that
        queues it, for the caller to make once the ids are on their way upstream: its copy of
        the prompt (~2.7 ms at 1M characters) then runs while the upstream computes, not
        before the request leaves.  ``text`` is the rendered prompt, rendered from ``masked``
        when the client content held special-token text; ``source``, what it was rendered
        from before masking."""
        if self._rate <= 0 or self._random.random() >= self._rate:
            return None
        sentinels = None if masked is None else masked.tokens

        def queue_check() -> None:
            try:
                utf8 = self._buffers.get_nowait()
            except queue.Empty:
                self._metrics.shadow_drops.inc()
                return
            # From the rendered pieces, not the session tokenizer's bytes of them: the check
            # must not depend on how those were built.
            write_utf8(text, utf8)
            self._jobs.put(
                ShadowJob(tokenizer, session, utf8, sentinels, encoding.ids, encoding.route,
                          typed, sent, source, encoding.engines)
            )  # fmt: skip

        return queue_check

    def close(self, timeout_s: float | None = None) -> None:
        """Finishes the checks already queued, then stops the worker and the child; with
        ``timeout_s``, what is not done by then is dropped (and counted), the check running
        cut short, so that a queue of long checks cannot hold up a shutdown."""
        if self._worker.is_alive():
            self._closing.set()  # no more rests: finish the queue
            self._jobs.put(None)
            self._worker.join(timeout_s)
            if self._worker.is_alive():
                self._abandon.set()
                self._oracle.kill()
                self._worker.join()
        self._oracle.close()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            started = self._clock()
            try:
                if self._abandon.is_set():
                    self._metrics.shadow_drops.inc()
                    continue
                self._check(job)
            except Exception:
                if self._abandon.is_set():
                    self._metrics.shadow_drops.inc()
                else:
                    log.exception("shadow check failed")
            finally:
                self._buffers.put(job.utf8)
            self._closing.wait((self._clock() - started) * self._rest_per_busy)

    def _check(self, job: ShadowJob) -> None:
        found = self._oracle.check(
            job.tokenizer, job.utf8, job.sentinels, job.ids, job.sent, job.source
        )
        if found is not None:
            self._diverged(dataclasses.replace(job, ids=found.actual), found.expected, found.index)
        # Counted once everything is done: a reader that sees the check sees its divergence.
        self._metrics.shadow_checks.inc()

    def _diverged(self, job: ShadowJob, expected: IdArray, index: int) -> None:
        """Forget, switch off, reproduce, log; the metrics last (once they count, all is done)."""
        pieces = job.typed if job.sentinels is not None else None
        if job.sentinels is None:
            job.tokenizer.forget(job.session)
        elif pieces is not None:
            pieces.forget(job.session)
        if self._disable_on_divergence:
            job.tokenizer.disable_repair("shadow verifier divergence")
            if pieces is not None:
                pieces.disable_repair("shadow verifier divergence")
        tokenizer_id = _tokenizer_id(job.tokenizer)
        repro = self._write_repro(job, expected, index, tokenizer_id)
        event = {
            "event": "shadow_divergence",
            "session": session_digest(job.session),
            "route": job.route,
            "engine": _engine(job, index),
            "first_index": index,
            "expected_ids": len(expected),
            "actual_ids": len(job.ids),
            "tokenizer": tokenizer_id,
            "session_forgotten": job.sentinels is None or pieces is not None,
            "repair_disabled": self._disable_on_divergence,
            "repro": str(repro) if repro else None,
        }
        log.error("shadow verifier divergence %s", orjson.dumps(event).decode())
        self._metrics.shadow_divergences.inc()

    def _write_repro(
        self, job: ShadowJob, expected: IdArray, index: int, tokenizer_id: dict[str, str]
    ) -> Path | None:
        low, high = max(0, index - _CONTEXT), index + _CONTEXT
        repro = {
            "tokenizer": tokenizer_id,
            "route": job.route,
            "engine": _engine(job, index),
            "engines": [run._asdict() for run in job.engines],
            "text": job.text,
            "sentinels": job.sentinels,
            "first_index": index,
            "expected_around": expected[low:high].tolist(),
            "actual_around": job.ids[low:high].tolist(),
            "expected": expected.tolist(),
            "actual": job.ids.tolist(),
        }
        name = f"{time.strftime('%Y%m%dT%H%M%S')}-{session_digest(job.session)}-{index}.json"
        try:
            path = self._repro_folder() / name
            path.write_bytes(orjson.dumps(repro))
        except OSError as exc:
            log.error("could not write the shadow reproduction to %s: %s", self._repro_dir, exc)
            return None
        return path

    def _repro_folder(self) -> Path:
        """Where this process writes reproductions (they hold prompt text): the configured
        folder when this process created it (mode 0700), else a fresh private folder beside
        it.  A folder that already exists is never written into, whoever made it and
        whatever its mode: another user could read it, or have linked it elsewhere."""
        if self._repro_made is None:
            try:
                self._repro_dir.mkdir(mode=0o700, parents=True)
                self._repro_made = self._repro_dir
            except FileExistsError:
                parent, prefix = self._repro_dir.parent, self._repro_dir.name + "-"
                self._repro_made = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        return self._repro_made


def session_digest(session: str) -> str:
    """A short stable name for a session key (keys hold a client's conversation id)."""
    return hashlib.blake2b(session.encode(), digest_size=6).hexdigest()


def _engine(job: ShadowJob, index: int) -> str:
    """The engine of the first wrong id: the one whose run holds it (an id missing at the
    end counts against the run before), or "unrecorded"."""
    found = engine_at(job.engines, index)
    if found is None and index == len(job.ids):
        found = engine_at(job.engines, index - 1)
    return found or "unrecorded"


def _tokenizer_id(tokenizer: CheckedTokenizer) -> dict[str, str]:
    serialized = tokenizer.reference.tokenizer.to_str().encode()
    return {
        "family": tokenizer.spec.family or "unknown",
        "sha256": hashlib.sha256(serialized).hexdigest(),
    }
