"""TranscriptEncoder: exact ids of a text, repaired from the state of a related text.

The ids always equal the reference encode of the whole text; reuse of the previous state's ids
is only an optimisation, taken where stable cuts are proven (see ``boundaries`` and
``repair``).  What was encoded before is not kept here: a caller (``app.sessions``) hands in
the previous state and keeps the new one.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.pieced_text import PiecedText, joined
from app.tokenization.boundaries import CutRules
from app.tokenization.bpe_appends import BpeAppender
from app.tokenization.chunked import PARALLEL_CHUNK, ChunkedEncoder, NativeIds
from app.tokenization.diff import common_prefix
from app.tokenization.engines import EngineParts, EngineRun, runs_of
from app.tokenization.gpu_route import GpuColdStarts, gpu_cold_starts
from app.tokenization.growable import Growable
from app.tokenization.native_route import CpuEncoder, native_or_why
from app.tokenization.reference import CopiedIds, IdArray, ReferenceEncoder
from app.tokenization.repair import Plan, Repairer, Reuse
from app.tokenization.state import SessionState
from app.tokenizer_spec import TokenizerSpec, load_spec

WHOLE = ("full", "gpu")
"""The routes that encode the whole text."""


@dataclass(frozen=True, slots=True)
class Encoding:
    """The ids of one text and how they were obtained."""

    ids: IdArray
    """Read-only int32 ids, equal to the reference encode of the whole text."""
    route: str
    """"hit" (same text as stored), "append", "edit" (reuse around changes), "full" (the CPU
    reference) or "gpu" (a cold start encoded on the GPU, ``gpu_route``)."""
    reused_tokens: int = 0
    encoded_bytes: int = 0
    """Bytes of text the reference encoded for this call."""
    searches: int = 0
    retries: int = 0
    fallback: str | None = None
    """Why the full path was taken, when it was."""
    copied: CopiedIds | None = None
    """Stretches of ``ids`` copied from the session's previous ids (so callers can reuse
    what they derived from those, such as their JSON)."""
    lookup_s: float = 0.0
    """Time to find the stored transcript and diff against it (cut searches included)."""
    window: int = 0
    """The widest window a cut search looked in (bytes); 0 when none ran."""
    parallel_chunks: int = 0
    """Chunks the reference encoded in parallel for this call (``chunked``); 0 when every
    text it encoded went whole."""
    native_bytes: int = 0
    """Bytes of ``encoded_bytes`` the native encoder encoded (``native``); the rest went to
    the reference."""
    engines: tuple[EngineRun, ...] = ()
    """Which engine gave which ids, in order, covering ``ids`` (``engines``); empty where
    the caller built the encoding without recording them."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The state of a text and how it was obtained."""

    state: SessionState
    route: str
    plan: Plan | None = None
    fallback: str | None = None
    copied: CopiedIds | None = None
    """Stretches of the state's ids copied from the stored ones."""
    chunks: int = 0
    """Chunks encoded in parallel (``Encoding.parallel_chunks``)."""
    native_bytes: int = 0
    """Bytes the native encoder encoded (``Encoding.native_bytes``)."""
    engines: EngineParts = ()
    """Which engine gave the state's ids (``Encoding.engines``)."""


class TranscriptEncoder:
    """Reference-exact ids of a text given the state of a related one; thread-safe."""

    def __init__(
        self,
        reference: ReferenceEncoder,
        spec: TokenizerSpec,
        *,
        window: int = 512,
        max_doublings: int = 5,
        resync_search: int = 1 << 17,
        parallel_chunk: int = PARALLEL_CHUNK,
        appender: BpeAppender | None = None,
        gpu: GpuColdStarts | None = None,
        native: NativeIds | None = None,
        native_off: str | None = None,
    ) -> None:
        """``native``: the exact native encoder of a proven family (``native_encoder``), used
        for every text encoded whole or in chunks, the reference where it declines;
        ``native_off``: why there is none, for ``explain``."""
        self.reference = reference
        self.gpu = gpu
        self.spec = spec
        self._native_off = native_off
        self._appender = appender  # appends without pre-split (SentencePiece BPE)
        # Proven families get both: long texts encoded in parallel chunks, and repair.
        self._chunked = (
            ChunkedEncoder(reference, CutRules(spec), parallel_chunk, native)
            if spec.proven
            else None
        )
        self._repairer = (
            Repairer(
                self._chunked, window=window, doublings=max_doublings, resync_search=resync_search
            )
            if self._chunked is not None
            else None
        )
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._engine_ids: Counter[str] = Counter()
        """Ids each engine gave (``Encoding.engines``), for ``explain``."""
        self._repair_disabled: str | None = None

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        gpu_cold_start: int = 0,
        cpu_encoder: CpuEncoder = "native",
        **options: Any,
    ) -> TranscriptEncoder:
        """Load a tokenizer.json; keyword options as for the constructor.  ``gpu_cold_start``:
        cold starts of at least that many bytes go to the GPU when there is one (0: never).
        ``cpu_encoder``: "native" encodes on the CPU natively where the family is covered,
        "reference" always with the reference."""
        spec = load_spec(path)
        if not spec.proven and "appender" not in options:
            options["appender"] = BpeAppender.for_file(path)
        reference = ReferenceEncoder.from_file(path)
        if "gpu" not in options:
            options["gpu"] = gpu_cold_starts(reference.tokenizer, gpu_cold_start)
        if "native" not in options and spec.proven:
            options["native"], options["native_off"] = native_or_why(reference, cpu_encoder)
        return cls(reference, spec, **options)

    def disable_repair(self, reason: str) -> None:
        """Encode every text in full from now on (until restart); ``reason`` becomes the
        fallback reason.  The shadow verifier's switch after a divergence."""
        self._repair_disabled = reason

    def explain(self) -> dict[str, Any]:
        """Family, proven rule set (or why none) and counters."""
        with self._lock:
            counts = dict(self._counts)
            engines = dict(self._engine_ids)
        searches = counts.get("searches", 0)
        return {
            "family": self.spec.family,
            "proven": self.spec.proven,
            "rules": list(self._repairer.rules.names) if self._repairer else [],
            "unproven_reason": self.spec.unproven_reason,
            "normalizer": self.spec.normalizer,
            "added_tokens": len(self.spec.added_tokens),
            "special_frame": self.reference.frame is not None,
            "counters": counts,
            "first_window_acceptance": (
                counts.get("first_window", 0) / searches if searches else None
            ),
            "parallel_chunks": self._chunked.stats() if self._chunked else None,
            "native_off": self._native_off,
            "engines": engines,
        }

    def outcome(
        self, text: str | PiecedText, data: bytes, base: SessionState | None, prefix: int | None
    ) -> Outcome:
        """The state for ``data`` and how it was obtained; ``prefix`` is the common prefix of
        base and data when already known."""
        if base is None:
            return self._full(text, data, None, "no stored transcript")
        if self._repair_disabled is not None:
            return self._full(text, data, None, self._repair_disabled)
        if self._repairer is None:
            appender = self._appender if prefix is not None else None
            grown = appender.append(base, data) if appender is not None else None
            if grown is not None:
                return Outcome(grown, "append", engines=((len(grown.ids), "incremental"),))
            return self._full(text, data, None, "unproven family")
        if base.text == data:
            whole = ((0, len(base.ids), 0),) if len(base.ids) else ()
            reused: EngineParts = ((len(base.ids), "reused"),)
            return Outcome(base, "hit", copied=CopiedIds(base.ids, whole), engines=reused)
        if prefix is None:
            prefix = common_prefix(base.text, data)
        planning = time.perf_counter()
        plan = self._repairer.plan(base, data, prefix)
        plan.stats.seconds = time.perf_counter() - planning
        if not plan.reused_runs:
            return self._full(text, data, plan, "no stable cut in window")
        state, copied = self._repairer.assemble(base, data, plan)
        route = "append" if prefix == len(base.text) and plan.reused_runs == 1 else "edit"
        return Outcome(
            state, route, plan, copied=copied, chunks=plan.chunks, native_bytes=plan.native_bytes,
            engines=tuple(plan.engines),
        )  # fmt: skip

    def _full(
        self, pieced: str | PiecedText, data: bytes, plan: Plan | None, fallback: str
    ) -> Outcome:
        """The whole text encoded: route "gpu" when the GPU route takes it, else "full" from
        the CPU reference (in parallel chunks for a proven family)."""
        text = joined(pieced)
        ids = self.gpu.encode(text, data) if self.gpu is not None else None
        ends = self.reference.ends_from_lengths(ids, len(data)) if ids is not None else None
        if ids is not None and ends is not None:
            state = SessionState.grown(data, Growable.of((ids, ends)))
            return Outcome(state, "gpu", plan, fallback, engines=((len(ids), "gpu"),))
        if self._chunked is not None:
            encoded = self._chunked.encode(data, text)
            state = SessionState.grown(data, Growable.of((encoded.ids, encoded.ends)))
            return Outcome(
                state, "full", plan, fallback, chunks=encoded.chunks,
                native_bytes=encoded.native_bytes, engines=encoded.engines,
            )  # fmt: skip
        state = SessionState.grown(data, Growable.of(self.reference.encode(text)))
        if self._appender is not None:
            self._appender.remember(state, text)
        return Outcome(state, "full", plan, fallback, engines=((len(state.ids), "reference"),))

    def framed(self, text: str | PiecedText, core: IdArray, add_special_tokens: bool) -> IdArray:
        if not add_special_tokens:
            return core
        frame = self.reference.frame
        if frame is None:
            enc = self.reference.tokenizer.encode(joined(text), add_special_tokens=True)
            return _readonly(np.asarray(enc.ids, dtype=np.int32))
        prefix, suffix = frame
        if not len(prefix) and not len(suffix):
            return core
        return _readonly(np.concatenate([prefix, core, suffix]))

    def framed_engines(
        self, ids: IdArray, core: IdArray, parts: EngineParts
    ) -> tuple[EngineRun, ...]:
        """``Encoding.engines`` of ``ids``, ``core`` framed (``framed``): the frame's ids,
        or the whole re-encode where there is no fixed frame, are the reference's."""
        if ids is core:
            return runs_of(parts)
        frame = self.reference.frame
        if frame is None:
            return runs_of([(len(ids), "reference")])
        return runs_of([(len(frame[0]), "reference"), *parts, (len(frame[1]), "reference")])

    def record(
        self,
        ids: IdArray,
        outcome: Outcome,
        full_bytes: int | None,
        copied: CopiedIds | None,
        looked_up: float,
        engines: tuple[EngineRun, ...],
    ) -> Encoding:
        """The encoding's figures, counted into ``explain``; ``looked_up``: seconds spent
        finding the stored transcript (planning adds its diff and cut searches)."""
        route, plan, reason = outcome.route, outcome.plan, outcome.fallback
        reused = encoded = 0
        searches = retries = window = 0
        if plan is not None:
            looked_up += plan.stats.seconds
            window = plan.stats.widest
        if plan is not None and route not in WHOLE:
            for part in plan.parts:
                if isinstance(part, Reuse):
                    reused += part.last - part.first
                else:
                    encoded += part.end - part.start
        if full_bytes is not None:
            encoded = full_bytes
        if route == "hit":
            reused = len(ids)
        with self._lock:
            self._counts["route:" + route] += 1
            if reason is not None:
                self._counts["fallback:" + reason] += 1
            if plan is not None:
                stats = plan.stats
                searches, retries = stats.searches, stats.retries
                self._counts["searches"] += stats.searches
                self._counts["first_window"] += stats.first_window
                self._counts["retries"] += stats.retries
                self._counts["search_misses"] += stats.misses
                self._counts["cuts_rejected_by_stored_ends"] += stats.rejected
            self._counts["encoded_bytes"] += encoded
            self._counts["native_bytes"] += outcome.native_bytes
            self._counts["reused_tokens"] += reused
            for run in engines:
                self._engine_ids[run.engine] += run.last - run.first
        return Encoding(
            ids=ids,
            route=route,
            reused_tokens=reused,
            encoded_bytes=encoded,
            searches=searches,
            retries=retries,
            fallback=reason,
            copied=copied,
            lookup_s=looked_up,
            window=window,
            parallel_chunks=outcome.chunks,
            native_bytes=outcome.native_bytes,
            engines=engines,
        )


def _readonly(array: IdArray) -> IdArray:
    array.flags.writeable = False
    return array
