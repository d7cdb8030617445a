"""SessionTokenizer: exact token ids for transcripts that grow and change call after call.

    tok = SessionTokenizer.from_file("tokenizer.json")
    enc = tok.encode(text, session="tenant-a/chat-42")
    enc.ids    # == Tokenizer.from_file(...).encode(text, add_special_tokens=False).ids
    enc.route  # "hit" | "append" | "edit" | "full" | "gpu"

The ids always equal the reference encode of the whole text (``TranscriptEncoder``); this
class finds the state to repair from (the session's, else the tenant's stored text sharing
the longest prefix) and keeps the new one in the store.  The state and the last text of a
session are slots of one context of the store's registry: ``context_key`` of its key.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.errors import InvalidTextError
from app.memos import Memos
from app.pieced_text import EncodedPieces, PiecedText, joined
from app.sessions.memory import MemoryStore, SessionKey, SessionStore, context_key
from app.tokenization.diff import common_prefix
from app.tokenization.gpu_route import GpuColdStarts
from app.tokenization.reference import ReferenceEncoder
from app.tokenization.state import SessionState
from app.tokenization.transcript import WHOLE, Encoding, TranscriptEncoder
from app.tokenizer_spec import TokenizerSpec

_MAX_TEXT_BYTES = (1 << 31) - 1

Recent = str | EncodedPieces
"""What is kept of the text a session was last encoded from."""
RecentText = tuple[Recent, weakref.ref[SessionState]]
"""A session's last text, with the very state it was encoded into (``SessionTokenizer``), held
weakly: a state the store has evicted or refused is not kept alive from here."""


class SessionTokenizer:
    """Reference-exact tokenizer with per-session reuse; thread-safe."""

    def __init__(
        self,
        encoder: TranscriptEncoder,
        *,
        store: SessionStore | None = None,
        store_bytes: int = 512 << 20,
        recent: Memos[RecentText] | None = None,
    ) -> None:
        """``store``: a ``MemoryStore`` of ``store_bytes`` when None.  ``recent``: the text each
        session was last encoded from (a slot of the store's registry when None, so that one
        budget bounds both).  An accelerator beside the store, not part of a
        session's state: when a new text starts with the previous one (a plain append),
        ``str.startswith`` proves it without re-encoding the whole transcript to UTF-8, which
        costs more than anything else at millions of characters; a pieced text is kept with
        its pieces' UTF-8 ends, to build the next one's UTF-8 from (``EncodedPieces``).  An
        entry is used only together with the very state it was encoded into."""
        self.encoder = encoder
        self.store: SessionStore = store if store is not None else MemoryStore(store_bytes)
        self._recent: Memos[RecentText] = (
            recent if recent is not None else self.store.registry.slot("recent")
        )
        self._lock = threading.Lock()
        self._content_keys = 0

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        store: SessionStore | None = None,
        store_bytes: int = 512 << 20,
        recent: Memos[RecentText] | None = None,
        **options: Any,
    ) -> SessionTokenizer:
        """Load a tokenizer.json; ``options`` as for ``TranscriptEncoder.from_file``."""
        encoder = TranscriptEncoder.from_file(path, **options)
        return cls(encoder, store=store, store_bytes=store_bytes, recent=recent)

    @property
    def reference(self) -> ReferenceEncoder:
        return self.encoder.reference

    @property
    def spec(self) -> TokenizerSpec:
        return self.encoder.spec

    @property
    def gpu(self) -> GpuColdStarts | None:
        return self.encoder.gpu

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
        before the first "/" is the tenant (else ``tenant`` is).  Without it, the tenant's
        stored transcript sharing the longest prefix is used.  ``tenant`` scopes content lookup
        when there is no session.
        A ``PiecedText`` (a rendered prompt) is joined only when the text is encoded whole.
        """
        _check_text(text)
        started = time.perf_counter()
        key = store_key(session, tenant) if session is not None else None
        scope = key[0] if key is not None else tenant or ""
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
        outcome = self.encoder.outcome(text, data, base, prefix)
        core, route = outcome.state, outcome.route
        if key is None:
            # A keyless call supersedes the content entry it grew from.
            is_content = base_key is not None and base_key[1].startswith("c:")
            key = base_key if is_content and base_key else self._content_key(scope)
        if route != "hit" or base_key != key:
            self.store.put(key, core)
        if session is not None:
            size = sys.getsizeof(recent) if isinstance(recent, str) else recent.nbytes
            self._recent.put(context_key(key), (recent, weakref.ref(core)), size)
        ids = self.encoder.framed(text, core.ids, add_special_tokens)
        full_bytes = len(data) if route in WHOLE else None
        copied = outcome.copied if ids is core.ids else None
        engines = self.encoder.framed_engines(ids, core.ids, outcome.engines)
        return self.encoder.record(ids, outcome, full_bytes, copied, looked_up, engines)

    def forget(self, session: str, *, tenant: str | None = None) -> None:
        """Drop a session's stored state (its next call encodes in full)."""
        self.store.drop(store_key(session, tenant))

    def disable_repair(self, reason: str) -> None:
        """Encode every text in full from now on (``TranscriptEncoder.disable_repair``)."""
        self.encoder.disable_repair(reason)

    def explain(self) -> dict[str, Any]:
        """Family, proven rule set (or why none), counters and store figures."""
        return {
            **self.encoder.explain(),
            "store": self.store.stats(),
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
        remembered = self._recent.get(context_key(key))
        if remembered is None or remembered[1]() is not base:
            return None
        previous = remembered[0]
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

    def _content_key(self, scope: str) -> SessionKey:
        with self._lock:
            self._content_keys += 1
            return scope, f"c:{self._content_keys}"


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


def store_key(session: str, tenant: str | None = None) -> SessionKey:
    """The store's key of ``session``: ``tenant/name`` -> (tenant, name); a session without
    "/" is ``tenant``'s.  Its context is then ``session`` itself (``context_key``): the
    proxy's other memos of it use the same key.  (A session
    named ``tenant/c:<n>`` shares its context with a keyless text, as if one session.)"""
    head, slash, name = session.partition("/")
    return (head, name) if slash else (tenant or "", session)
