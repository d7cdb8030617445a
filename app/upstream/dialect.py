"""The one small interface every upstream dialect implements.

A dialect turns a ``Prompt`` (the exact ids, as ready-made JSON text) plus sampling parameters
into the upstream's HTTP request, and the upstream's replies (one JSON object per stream event,
or one whole response) into ``Generated`` pieces of output text.  Dialects whose upstream
answers in OpenAI chat form already (vLLM chat) set ``chat_native`` and their replies are
passed through.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import orjson

from app.generation import Sampling, TokenLogprob, Usage
from app.upstream.answers import Answer, usage

_IDS_PLACEHOLDER = "\x00toksplice-ids\x00"
_IDS_PLACEHOLDER_JSON = orjson.dumps(_IDS_PLACEHOLDER)
_SEND_SLICE = 256 << 10
"""Bytes of a ``Body``'s view part (the ids' JSON) handed to the HTTP client at once: a buffer
that size is freed and reused slice after slice, where one of the whole would be fresh pages."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """What is sent upstream: ``ids_json`` is ``b"1,2,3"``; ``text`` the rendered transcript,
    sent instead of ids when the startup alignment check failed (``as_text``; only then is
    it filled in)."""

    ids_json: bytes | memoryview
    n_ids: int
    text: str
    as_text: bool = False


@dataclass(frozen=True, slots=True)
class Body:
    """A request's JSON in the parts it is sent in, one after the other.

    The ids' JSON (2.5 MB at 1M characters) is sent in slices from the buffer it lies in,
    never joined into a new one: a fresh multi-megabyte buffer is pages the kernel must
    fault in, ~390 per call at 1M characters, which took ~6 ms on a 2-core VM in
    ``loadtest/replay.py``.  Iterable again (a request sent twice, ``client``)."""

    parts: tuple[bytes | memoryview, ...]

    def __len__(self) -> int:
        return sum(memoryview(part).nbytes for part in self.parts)

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            if isinstance(part, bytes):  # h11 sends bytes as they are
                yield part
                continue
            view = part.cast("B")
            for at in range(0, len(view), _SEND_SLICE):
                yield bytes(view[at : at + _SEND_SLICE])  # the one copy of a view's bytes


@dataclass(frozen=True, slots=True)
class Generated:
    """A piece of model output: text, and on the last piece the finish reason and usage."""

    text: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None
    token_ids: tuple[int, ...] = ()
    """Output ids for tokens-out upstreams; the caller detokenizes them."""
    stop_sequence: str | None = None
    """The stop string that ended the output, on the last piece, where the upstream says."""
    logprobs: tuple[TokenLogprob, ...] = ()
    """The log probabilities of this piece's tokens, where the client asked for them."""
    cumulative: bool = False
    """``text`` repeats all output so far (SGLang's default stream) instead of only the new
    part."""


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    model: str
    prompt: Prompt
    sampling: Sampling
    stream: bool
    chat_body: dict[str, Any] | None = None
    """The client's chat request, for dialects that forward it (vLLM chat)."""
    room: int | None = None
    """Tokens the model's context has left after the prompt (None: unknown); asked for when
    the client set no limit, since every server's own default is far smaller."""
    special_tokens: tuple[str, ...] = ()
    """Special tokens the answer's text must show: the tool format's markers, where they are
    special tokens (servers leave those out of the text they return unless asked)."""
    stop_token_ids: tuple[int, ...] = ()
    """Tokens the answer ends at besides the model's own end of turn (harmony's ``<|call|>``)."""

    def format_fields(self, *, detokenized: bool = True) -> dict[str, Any]:
        """vLLM's and SGLang's sampling fields (the same names in both) for the tool format:
        ``special_tokens`` kept in the text, none spaced out, where the server ``detokenized``
        the answer; the stop at ``stop_token_ids``."""
        fields: dict[str, Any] = {}
        if self.special_tokens and detokenized:
            fields |= {"skip_special_tokens": False, "spaces_between_special_tokens": False}
        if self.stop_token_ids:
            fields["stop_token_ids"] = list(self.stop_token_ids)
        return fields

    def sampling_fields(self, **names: str) -> dict[str, Any]:
        """The sampling fields under an upstream's names (``max_tokens="n_predict"``), the
        limit defaulted to ``room``."""
        sampling = self.sampling
        if sampling.max_tokens is None and self.room is not None and self.room > 0:
            sampling = replace(sampling, max_tokens=self.room)
        return sampling.named(**names)


class Dialect(ABC):
    """How one kind of upstream takes token ids and answers."""

    name: str
    chat_native = False
    tokens_out = False

    @abstractmethod
    def request(self, call: UpstreamCall) -> tuple[str, Body]:
        """(path, JSON body) of the generation request."""

    @abstractmethod
    def event(self, payload: Any, prompt_tokens: int) -> Generated:
        """One streamed event's output (``payload``: its JSON, whatever it is; read through
        ``Answer``, so a malformed one raises ``UpstreamMalformedError``)."""

    def response(self, payload: Any, prompt_tokens: int) -> Generated:
        """The output of a whole (non-streamed) response."""
        return self.event(payload, prompt_tokens)

    @abstractmethod
    def tokenize_request(self, text: str, model: str) -> tuple[str, bytes]:
        """(path, body) asking the upstream to tokenize ``text`` as a prompt."""

    def tokenize_response(self, payload: dict[str, Any]) -> list[int]:
        return [int(t) for t in payload["tokens"]]

    @abstractmethod
    def context_request(self, model: str) -> tuple[str, bytes | None]:
        """(path, body) of the call that reports the model's context; no body: a GET."""

    @abstractmethod
    def context_response(self, payload: Any, model: str) -> int | None:
        """The context in tokens that one request may fill, from that call's answer."""


def positive_int(value: Any) -> int | None:
    """``value`` if it is a positive integer (a context size), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def with_ids(fields: dict[str, Any], prompt: Prompt, *path: str) -> Body:
    """JSON of ``fields`` with the prompt's ids (or text) placed at key ``path``.

    The ids go in as ready-made JSON text, uncopied (``Body``); the placeholder goes first in
    its object, so the first occurrence in the output is ours whatever the other fields
    contain.
    """
    value: Any = prompt.text if prompt.as_text else _IDS_PLACEHOLDER
    body = orjson.dumps(_first(fields, path, value))
    if prompt.as_text:
        return Body((body,))
    head, tail = body.split(_IDS_PLACEHOLDER_JSON, 1)
    return Body((head + b"[", prompt.ids_json, b"]" + tail))


def _first(fields: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of ``fields`` with ``value`` at ``path``, each key on the path put first."""
    head, *rest = path
    inner = _first(dict(fields.get(head) or {}), tuple(rest), value) if rest else value
    return {head: inner, **{k: v for k, v in fields.items() if k != head}}


def usage_of(answer: Answer, prompt_tokens: int) -> Usage | None:
    """OpenAI-style ``usage`` (with llama.cpp/vLLM ``prompt_tokens_details``), if present.
    ``prompt_tokens`` is always the number of ids we sent."""
    if not answer.has("usage"):
        return None
    completion, cached = usage(answer)
    return Usage(prompt_tokens, completion or 0, cached)
