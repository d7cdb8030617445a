"""SessionTokenizer: exact token ids for transcripts that grow and change call after call.

    tok = SessionTokenizer.from_file("tokenizer.json")
    enc = tok.encode(text, session="tenant-a/chat-42")
    enc.ids    # == Tokenizer.from_file(...).encode(text, add_special_tokens=False).ids
    enc.route  # "hit" | "append" | "edit" | "full" | "gpu"

The ids always equal the reference encode of the whole text; reuse of stored ids is only an
optimisation, taken where stable cuts are proven (see ``boundaries`` and ``repair``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.errors import InvalidTextError
from app.pieced_text import EncodedPieces, PiecedText, joined
from app.tokenization.boundaries import CutRules
from app.tokenization.bpe_appends import BpeAppender
from app.tokenization.chunked import PARALLEL_CHUNK, ChunkedEncoder, NativeIds
from app.tokenization.diff import common_prefix
from app.tokenization.gpu_route import GpuColdStarts, gpu_cold_starts
from app.tokenization.growable import Growable
from app.tokenization.native_route import CpuEncoder, native_encoder
from app.tokenization.reference import CopiedIds, IdArray, ReferenceEncoder
from app.tokenization.repair import Plan, Repairer, Reuse
from app.tokenization.store import (
    MemoryStore,
    Recent,
    RecentTexts,
    SessionKey,
    SessionState,
    SessionStore,
)
from app.tokenizer_spec import TokenizerSpec, load_spec

_MAX_TEXT_BYTES = (1 << 31) - 1
_WHOLE = ("full", "gpu")
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


@dataclass(frozen=True, slots=True)
class _Outcome:
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


class SessionTokenizer:
    """Reference-exact tokenizer with per-session reuse; thread-safe."""

    def __init__(
        self,
        reference: ReferenceEncoder,
        spec: TokenizerSpec,
        *,
        window: int = 512,
        max_doublings: int = 5,
        resync_search: int = 1 << 17,
        store: SessionStore | None = None,
        store_bytes: int = 512 << 20,
        recent_text_bytes: int = 256 << 20,
        parallel_chunk: int = PARALLEL_CHUNK,
        appender: BpeAppender | None = None,
        gpu: GpuColdStarts | None = None,
        native: NativeIds | None = None,
    ) -> None:
        """``native``: the exact native encoder of a proven family (``native_encoder``), used
        for every text encoded whole or in chunks, the reference where it declines."""
        self.reference = reference
        self.gpu = gpu
        self.spec = spec
        self._appender = appender  # appends without pre-split (SentencePiece BPE)
        self.store: SessionStore = store if store is not None else MemoryStore(store_bytes)
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
        self._recent = RecentTexts(recent_text_bytes)
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._content_keys = 0
        self._repair_disabled: str | None = None

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        gpu_cold_start: int = 0,
        cpu_encoder: CpuEncoder = "native",
        **options: Any,
    ) -> SessionTokenizer:
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
            options["native"] = native_encoder(reference, cpu_encoder)
        return cls(reference, spec, **options)

    def encode(
        self,
        text: str | PiecedText,
        *,
        session: str | None = None,
        tenant: str | None = None,
        add_special_tokens: bool = False,
    ) -> Encoding:
        """Exact ids of ``text``.

        ``session`` ("tenant/conversation") names the stored transcript to repair from; its part
        before the first "/" is the tenant.  Without it, the tenant's stored transcript sharing
        the longest prefix is used.  ``tenant`` scopes content lookup when there is no session.
        A ``PiecedText`` (a rendered prompt) is joined only when the text is encoded whole.
        """
        _check_text(text)
        started = time.perf_counter()
        scope = _tenant_of(session, tenant)
        key: SessionKey | None = (scope, "s:" + session) if session is not None else None
        base = self.store.get(key) if key is not None else None
        base_key = key if base is not None else None
        related = self._related_bytes(key, text, base)
        prefix: int | None = None
        if related is not None:
            data, prefix, recent = related
        else:
            data, recent = _whole_bytes(text)
            if base is None:
                base_key, base = self._by_content(scope, data)
        if len(data) > _MAX_TEXT_BYTES:
            raise InvalidTextError("text is larger than 2 GiB")
        looked_up = time.perf_counter() - started
        outcome = self._core(text, data, base, prefix)
        core, route = outcome.state, outcome.route
        if key is None:
            # A keyless call supersedes the content entry it grew from.
            is_content = base_key is not None and base_key[1].startswith("c:")
            key = base_key if is_content and base_key else self._content_key(scope)
        if route != "hit" or base_key != key:
            self.store.put(key, core)
        if session is not None:
            self._recent.put(key, recent, core)
        ids = self._framed(text, core.ids, add_special_tokens)
        full_bytes = len(data) if route in _WHOLE else None
        copied = outcome.copied if ids is core.ids else None
        return self._record(ids, outcome, full_bytes, copied, looked_up)

    def forget(self, session: str, *, tenant: str | None = None) -> None:
        """Drop a session's stored state (its next call encodes in full)."""
        self.store.drop((_tenant_of(session, tenant), "s:" + session))

    def disable_repair(self, reason: str) -> None:
        """Encode every text in full from now on (until restart); ``reason`` becomes the
        fallback reason.  The shadow verifier's switch after a divergence."""
        self._repair_disabled = reason

    def explain(self) -> dict[str, Any]:
        """Family, proven rule set (or why none), counters and store figures."""
        with self._lock:
            counts = dict(self._counts)
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
            "store": self.store.stats(),
            "recent_texts": self._recent.stats(),
            "parallel_chunks": self._chunked.stats() if self._chunked else None,
        }

    def _related_bytes(
        self, key: SessionKey | None, text: str | PiecedText, base: SessionState | None
    ) -> tuple[bytes, int, Recent] | None:
        """(UTF-8 of ``text``, its common prefix with ``base.text``, what to remember of
        ``text``) built from ``base`` without encoding all of ``text``, when it is related to
        the text ``base`` was encoded from: a ``str`` that starts with it (``str.startswith``),
        or a ``PiecedText`` whose pieces mostly equal its pieces at the same positions
        (``EncodedPieces.successor``); else None."""
        if key is None or base is None:
            return None
        previous = self._recent.get(key, base)
        with _positions_in(text):
            if isinstance(text, str):
                if not isinstance(previous, str) or not text.startswith(previous):
                    return None
                rest = text[len(previous) :].encode("utf-8")
                return b"".join((base.text, rest)), len(base.text), text
            if not isinstance(previous, EncodedPieces):
                return None
            found = previous.successor(text, base.text)
        if found is None:
            return None
        data, shared, encoded = found
        return data, shared + common_prefix(base.text, data, shared, shared), encoded

    def _by_content(self, scope: str, data: bytes) -> tuple[SessionKey | None, SessionState | None]:
        found = self.store.find_by_content(scope, data)
        return (None, None) if found is None else found

    def _core(
        self, text: str | PiecedText, data: bytes, base: SessionState | None, prefix: int | None
    ) -> _Outcome:
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
                return _Outcome(grown, "append")
            return self._full(text, data, None, "unproven family")
        if base.text == data:
            whole = ((0, len(base.ids), 0),) if len(base.ids) else ()
            return _Outcome(base, "hit", copied=CopiedIds(base.ids, whole))
        if prefix is None:
            prefix = common_prefix(base.text, data)
        planning = time.perf_counter()
        plan = self._repairer.plan(base, data, prefix)
        plan.stats.seconds = time.perf_counter() - planning
        if not plan.reused_runs:
            return self._full(text, data, plan, "no stable cut in window")
        state, copied = self._repairer.assemble(base, data, plan)
        route = "append" if prefix == len(base.text) and plan.reused_runs == 1 else "edit"
        return _Outcome(
            state, route, plan, copied=copied, chunks=plan.chunks, native_bytes=plan.native_bytes
        )

    def _full(
        self, pieced: str | PiecedText, data: bytes, plan: Plan | None, fallback: str
    ) -> _Outcome:
        """The whole text encoded: route "gpu" when the GPU route takes it, else "full" from
        the CPU reference (in parallel chunks for a proven family)."""
        text = joined(pieced)
        ids = self.gpu.encode(text, data) if self.gpu is not None else None
        ends = self.reference.ends_from_lengths(ids, len(data)) if ids is not None else None
        if ids is not None and ends is not None:
            state = SessionState.grown(data, Growable.of((ids, ends)))
            return _Outcome(state, "gpu", plan, fallback)
        if self._chunked is not None:
            encoded = self._chunked.encode(data, text)
            state = SessionState.grown(data, Growable.of((encoded.ids, encoded.ends)))
            return _Outcome(
                state, "full", plan, fallback, chunks=encoded.chunks,
                native_bytes=encoded.native_bytes,
            )  # fmt: skip
        state = SessionState.grown(data, Growable.of(self.reference.encode(text)))
        if self._appender is not None:
            self._appender.remember(state, text)
        return _Outcome(state, "full", plan, fallback)

    def _framed(self, text: str | PiecedText, core: IdArray, add_special_tokens: bool) -> IdArray:
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

    def _content_key(self, scope: str) -> SessionKey:
        with self._lock:
            self._content_keys += 1
            return scope, f"c:{self._content_keys}"

    def _record(
        self,
        ids: IdArray,
        outcome: _Outcome,
        full_bytes: int | None,
        copied: CopiedIds | None,
        looked_up: float,
    ) -> Encoding:
        """The encoding's figures, counted into ``explain``; ``looked_up``: seconds spent
        finding the stored transcript (planning adds its diff and cut searches)."""
        route, plan, reason = outcome.route, outcome.plan, outcome.fallback
        reused = encoded = 0
        searches = retries = window = 0
        if plan is not None:
            looked_up += plan.stats.seconds
            window = plan.stats.widest
        if plan is not None and route not in _WHOLE:
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
        )


def _check_text(text: object) -> None:
    if not isinstance(text, str | PiecedText):
        raise InvalidTextError(f"text must be str, not {type(text).__name__}")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidTextError(
            f"text is not valid Unicode at character {exc.start}: {exc.reason}"
        ) from None


def _whole_bytes(text: str | PiecedText) -> tuple[bytes, Recent]:
    """UTF-8 of all of ``text``, and what to remember of it."""
    if isinstance(text, str):
        return _utf8(text), text
    with _positions_in(text):
        return EncodedPieces.measured(text)


@contextlib.contextmanager
def _positions_in(text: str | PiecedText) -> Iterator[None]:
    """A part of ``text`` that is not valid Unicode raises ``InvalidTextError`` naming the
    position in all of ``text``."""
    try:
        yield
    except UnicodeEncodeError:
        _utf8(joined(text))  # raises
        raise


def _tenant_of(session: str | None, tenant: str | None) -> str:
    if session is not None and "/" in session:
        return session.split("/", 1)[0]
    return tenant or ""


def _readonly(array: IdArray) -> IdArray:
    array.flags.writeable = False
    return array
