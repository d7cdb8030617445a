"""Special-token text typed by a user stays text.

A rendered transcript holds special tokens the chat template placed (``<|im_start|>``) and,
sometimes, the same strings inside user content: a pasted tokenizer file, a tool output that
prints ``<|im_end|>``.  Encoding the rendered text as a whole would turn the latter into
control tokens (a prompt injection, and not what the user wrote).  toksplice's rule, as in
tiktoken: special tokens come only from the template.

For the rare request whose client-supplied strings contain special-token text, each such
occurrence is swapped for a private-use sentinel character before rendering; the rendered
text is cut at the special tokens it still holds (all placed by the template), and each piece
between them, sentinels restored, is encoded with special-token matching off.  That is exactly
Hugging Face's own procedure (split at special tokens, encode the pieces) with the user's text
kept out of the split.  Such requests take their own route, "pieces" (their ids are not a plain
encode of the text, so the session tokenizer's store cannot hold them): between calls of a
session it reuses the previous call's pieces and repairs a long piece that changed from its
previous version (``pieces``, ``piece_repair``), all of it kept in the session's one context.

Client strings are every string the template can see: values and object keys, at any depth
(a tool schema's property names, an object-valued ``tool_calls`` argument), in the messages,
the tools and ``chat_template_kwargs``.  The sentinels cannot be forged: a request that needs
masking and holds a sentinel character anywhere (a key included) is refused, so every
sentinel in the rendered text is one the masking put there.  A request without special-token
text is never masked and may use those characters freely.  (Sentinels drawn per request from
characters the request lacks would avoid the refusal, but would change between the calls of
a session and defeat the piece reuse; U+10FD00..U+10FFFD are private-use code points that
ordinary text does not carry.)
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from tokenizers import Tokenizer

from app.errors import BadRequestError, TokenizerSpecError
from app.sessions.piece_repair import PieceRepairer
from app.sessions.pieces import PieceEncoder, PieceIds
from app.sessions.registry import SessionRegistry, Slot
from app.tokenization.chunked import PARALLEL_CHUNK
from app.tokenization.native_route import CpuEncoder

_SENTINEL_BASE = 0x10FD00  # Supplementary Private Use Area-B, top block: one per distinct
# special token typed in a request (at most 766 distinct ones)
_SENTINELS = re.compile("[\U0010fd00-\U0010fffd]")


@dataclass(frozen=True, slots=True)
class Masked:
    """Client data with special-token text swapped for sentinels."""

    messages: list[Any]
    tools: list[Any] | None
    tokens: dict[str, str]
    """Sentinel -> the special-token text it stands for."""
    template_kwargs: dict[str, Any] | None = None

    @property
    def data(self) -> tuple[list[Any], list[Any] | None, dict[str, Any] | None]:
        """The messages, tools and template variables to render."""
        return self.messages, self.tools, self.template_kwargs

    def restore(self, text: str) -> str:
        """``text`` (rendered from the masked data) with the user's special text back."""
        return _SENTINELS.sub(lambda m: self.tokens.get(m.group(), m.group()), text)


@dataclass(frozen=True, slots=True)
class _Checked:
    """What scanning one message (or the tools) found; for items with special text, the
    masked copy and the original's JSON (``==`` holds 1 == 1.0 == True, JSON does not)."""

    special: bool
    sentinel: bool
    size: int
    masked: Any = None
    json: bytes = b""


@dataclass(frozen=True, slots=True)
class _MaskMemo:
    """A session's previous call: its tools, then messages, and what scanning found, with
    the totals over them; ``sentinels`` maps special-token text to its sentinel."""

    items: list[Any]
    checked: list[_Checked]
    sentinels: dict[str, str]
    totals: tuple[int, int, int] = (0, 0, 0)
    """Items with special text, items with sentinel characters, approximate bytes."""


class TypedSpecials:
    """Finds special-token text in client strings and encodes transcripts that had some."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        sessions: SessionRegistry | None = None,
        parallel_chunk: int = PARALLEL_CHUNK,
        cpu_encoder: CpuEncoder = "native",
    ) -> None:
        """``sessions`` keeps each session's scan and pieces, the states of its long pieces
        with them (a registry of its own, 64 MiB, when None); ``cpu_encoder`` as for the
        session tokenizer."""
        self.sessions = sessions if sessions is not None else SessionRegistry(64 << 20)
        specials = [t for t in tokenizer.get_added_tokens_decoder().values() if t.special]
        self._ids = {t.content: _id_of(tokenizer, t.content) for t in specials}
        self._tokens = sorted(self._ids, key=len, reverse=True)
        self._stripping = [
            t.content for t in specials if t.lstrip or t.rstrip or t.single_word or t.normalized
        ]
        self._heads = tuple({t[:2] for t in self._tokens})
        self._find = re.compile("|".join(map(re.escape, self._tokens))) if self._tokens else None
        self._repairer = PieceRepairer(tokenizer, parallel_chunk, cpu_encoder)
        special_ids = {t: np.asarray([i], np.int32) for t, i in self._ids.items()}
        self._memos: Slot[_MaskMemo] = self.sessions.slot("special_scan")
        self._pieces = (
            PieceEncoder(
                self._find,
                special_ids,
                self._repairer.encode,
                states=self.sessions.slot("pieces"),
            )
            if self._find is not None
            else None
        )

    def forget(self, session: str) -> None:
        """Drops what the session's calls left (the shadow verifier caught a divergence):
        its scan memo and piece state (cached pieces and long pieces' states included)."""
        self._memos.drop(session)
        if self._pieces is not None:
            self._pieces.forget(session)

    def disable_repair(self, reason: str) -> None:
        """Encodes every piece whole from now on (see ``SessionTokenizer.disable_repair``)."""
        self._repairer.disable_repair(reason)

    def mask(
        self,
        messages: list[Any],
        tools: list[Any] | None,
        *,
        session: str | None = None,
        template_kwargs: dict[str, Any] | None = None,
    ) -> Masked | None:
        """None when no client string holds special-token text (the common case); else the
        data with each occurrence swapped for a sentinel.  With ``session``, messages equal to
        the previous call's are not scanned again (agents resend the whole transcript)."""
        if self._find is None:
            return None
        memo = self._memos.get(session) if session is not None else None
        # tools and template variables first: their indices stay put
        memo = self._scan([tools, template_kwargs, *messages], memo)
        if session is not None:
            self._memos.put(session, memo, memo.totals[2])
        specials, sentinel_uses, _ = memo.totals
        if not specials:
            return None
        if self._stripping:
            raise BadRequestError(
                "the request contains special-token text in its content and this tokenizer's "
                f"special tokens strip or normalize ({', '.join(self._stripping[:3])}): it "
                "cannot be kept as plain text",
                param="messages",
            )
        if sentinel_uses:
            raise BadRequestError(
                "the request uses characters U+10FD00..U+10FFFD, which "
                "toksplice reserves when it keeps special-token text plain"
            )
        pairs = zip(memo.checked, memo.items, strict=True)
        masked = [c.masked if c.special else item for c, item in pairs]
        tokens = {v: k for k, v in memo.sentinels.items()}
        return Masked(masked[2:], masked[0], tokens, masked[1])

    def _scan(self, items: list[Any], memo: _MaskMemo | None) -> _MaskMemo:
        """What scanning ``items`` finds.  Items that are last call's objects (the body parser
        and client translators reuse them) were scanned then: only the others are visited,
        and the totals are updated by difference, so an edit near the start (a billing line)
        costs what the edited items cost."""
        if memo is None:
            memo = _MaskMemo([], [], {})
        sentinels = dict(memo.sentinels)
        same = list(map(operator.is_, items, memo.items))
        checked = memo.checked[: len(items)]
        changed = list(itertools.compress(range(len(same)), map(operator.not_, same)))
        gone = [*changed, *range(len(items), len(memo.checked))]
        added = []
        for k in [*changed, *range(len(same), len(items))]:
            found = self._checked(k, items[k], memo, sentinels)
            added.append(found)
            if k < len(checked):
                checked[k] = found
            else:
                checked.append(found)
        removed, gained = _totals(memo.checked[k] for k in gone), _totals(added)
        specials, sentinel_uses, size = (
            t - r + g for t, r, g in zip(memo.totals, removed, gained, strict=True)
        )
        return _MaskMemo(items, checked, sentinels, (specials, sentinel_uses, size))

    def _checked(
        self, index: int, item: Any, memo: _MaskMemo | None, sentinels: dict[str, str]
    ) -> _Checked:
        if (
            memo is not None
            and index < len(memo.items)
            and (item is memo.items[index] or item == memo.items[index])
        ):
            old = memo.checked[index]
            if not old.special or orjson.dumps(item) == old.json:
                return old
        special = self._contains(item, self._has_special)
        sentinel = self._contains(item, _has_sentinel)
        size = _approx_bytes(item)
        if not special:
            return _Checked(False, sentinel, size)
        masked = _map_strings(item, lambda text: self._swap(text, sentinels))
        return _Checked(True, sentinel, size, masked, orjson.dumps(item))

    def encode(self, rendered: str, masked: Masked, *, session: str) -> PieceIds:
        """The exact ids of a transcript rendered from ``masked``, with what was reused."""
        assert self._pieces is not None
        return self._pieces.encode(rendered, masked.tokens, masked.restore, session=session)

    def _has_special(self, text: str) -> bool:
        """Searched a slice at a time, as ``_has_sentinel``; the slices overlap by the longest
        token less one character, so an occurrence starting in one is found whole in it."""
        if self._find is None:
            return False
        find, heads, reach = self._find.search, self._heads, len(self._tokens[0]) - 1
        return any(
            any(text.find(head, k, k + SCAN_STEP + reach) >= 0 for head in heads)
            and find(text, k, k + SCAN_STEP + reach) is not None
            for k in range(0, len(text), SCAN_STEP)
        )

    def _contains(self, value: Any, test: Callable[[str], bool]) -> bool:
        if isinstance(value, str):
            return test(value)
        if isinstance(value, dict):
            return any(
                (isinstance(k, str) and test(k)) or self._contains(v, test)
                for k, v in value.items()
            )
        if isinstance(value, list | tuple):
            return any(self._contains(v, test) for v in value)
        return False

    def _swap(self, text: str, sentinels: dict[str, str]) -> str:
        assert self._find is not None

        def sentinel(match: re.Match[str]) -> str:
            token = match.group()
            if token not in sentinels:
                sentinels[token] = chr(_SENTINEL_BASE + len(sentinels))
            return sentinels[token]

        return self._find.sub(sentinel, text)


def _totals(checked: Iterable[_Checked]) -> tuple[int, int, int]:
    """``_MaskMemo.totals`` over some checked items."""
    items = list(checked)
    return (
        sum(c.special for c in items),
        sum(c.sentinel for c in items),
        sum(c.size for c in items),
    )


def _approx_bytes(item: Any) -> int:
    """Rough memory a message holds: its text plus per-object overhead."""
    if not isinstance(item, dict):
        return 512
    return 256 + sum(4 * len(v) + 64 if isinstance(v, str) else 512 for v in item.values())


SCAN_STEP = 1 << 20
"""Characters a search of client text reads in one call: one regex search holds the GIL, ~50
ms over 10M characters."""


def _has_sentinel(text: str) -> bool:
    """Searched a slice at a time (the pattern is one character)."""
    return any(_SENTINELS.search(text, k, k + SCAN_STEP) for k in range(0, len(text), SCAN_STEP))


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A copy of JSON data with ``change`` applied to every string, object keys included
    (``change`` is injective, so distinct keys stay distinct)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {
            change(k) if isinstance(k, str) else k: _map_strings(v, change)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_map_strings(v, change) for v in value]
    return value


def _id_of(tokenizer: Tokenizer, token: str) -> int:
    found = tokenizer.token_to_id(token)
    if found is None:
        raise TokenizerSpecError(f"special token {token!r} has no id in the vocabulary")
    return int(found)
