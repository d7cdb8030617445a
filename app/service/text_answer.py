"""A text-out upstream's answer as OpenAI chat chunks: ids detokenized (tokens-out upstreams),
cumulative text made incremental, stop strings cut, tool calls and reasoning parsed out
(``ChatAssembler``).

The work is proportional to what the upstream sent, which the client's request and the
upstream decide; an event or answer past ``INLINE_BYTES`` is worked in a worker thread
(``ChatService``), and so is the automaton of a long list of stop strings
(``stop_strings``), so that neither stalls the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio.to_thread
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from app.errors import UpstreamTruncatedError
from app.generation import TokenLogprob, Usage
from app.protocol.chat_logprobs import ChatLogprobs
from app.protocol.chat_stream import ChatAssembler
from app.upstream.dialect import Dialect, Generated
from app.upstream.stops import StopStrings, StopTrim, trimmed

INLINE_BYTES = 64 << 10
"""An upstream event (its SSE line) under this many bytes is worked on the event loop: a few
milliseconds at most; a larger one in a worker thread."""
_INLINE_STOP_CHARS = 4096
"""Stop strings of fewer characters in all are compiled on the event loop."""


async def stop_strings(stops: list[str]) -> StopStrings:
    """The automaton of ``stops``; compiled in a worker thread when they are long (10,000
    stop strings take ~0.1 s or more)."""
    if sum(map(len, stops)) < _INLINE_STOP_CHARS:
        return StopStrings(stops)
    return await anyio.to_thread.run_sync(StopStrings, stops)


class StreamedText:
    """One streamed answer: ``step`` each upstream event, then ``end``; each returns the chat
    chunks it adds."""

    def __init__(
        self,
        dialect: Dialect,
        tokenizer: Tokenizer,
        assembler: ChatAssembler,
        stops: StopStrings,
        prompt_tokens: int,
        dropped_ids: frozenset[int] | None = None,
        *,
        top_logprobs: int | None = None,
    ) -> None:
        """``dropped_ids``: None, ids we detokenize lose their special tokens; else they keep
        them (the tool format's markers are special tokens) but for these ids (the others:
        an end-of-turn token the ids hold, say); ``top_logprobs``: the client asked for log
        probabilities, with that many alternatives (``ChatLogprobs``)."""
        self._dialect = dialect
        self._tokenizer = tokenizer
        self._assembler = assembler
        skip = dropped_ids is None
        self._decoder = DecodeStream(skip_special_tokens=skip) if dialect.tokens_out else None
        self._dropped = dropped_ids or frozenset()
        self._stops = StopTrim(stops)
        self._prompt_tokens = prompt_tokens
        self._seen = 0
        self._finish_reason: str | None = None
        self._stop_sequence: str | None = None
        self._usage: Usage | None = None
        self._logprobs = ChatLogprobs(top_logprobs)
        self._logprobs_seen = 0

    def step(self, payload: Any) -> list[dict[str, Any]]:
        piece = self._dialect.event(payload, self._prompt_tokens)
        text = self._decoded(piece)
        if piece.cumulative:
            text, self._seen = text[self._seen :], len(text)
        else:
            self._seen += len(text)
        self._finish_reason = piece.finish_reason or self._finish_reason
        self._stop_sequence = piece.stop_sequence or self._stop_sequence
        self._usage = piece.usage or self._usage
        logprobs = piece.logprobs
        if piece.cumulative:  # all so far, like the text (SGLang's default stream)
            logprobs, self._logprobs_seen = logprobs[self._logprobs_seen :], len(logprobs)
        self._logprobs.add(spelled(logprobs, self._tokenizer))
        return self._logprobs.attach(self._assembler.chunks(self._stops.feed(text)))

    def end(self, include_usage: bool) -> list[dict[str, Any]]:
        chunks = list(self._assembler.chunks(self._stops.end()))
        reason = finished(self._finish_reason)
        chunks += self._assembler.last_chunks(
            reason, self._usage, include_usage, self._stop_sequence
        )
        return self._logprobs.attach(chunks)

    def _decoded(self, piece: Generated) -> str:
        if self._decoder is None:
            return piece.text
        decoder, tokenizer, dropped = self._decoder, self._tokenizer, self._dropped
        ids = (t for t in piece.token_ids if t not in dropped)
        return "".join(p for t in ids if (p := decoder.step(tokenizer, t)))


def whole_text(
    dialect: Dialect,
    tokenizer: Tokenizer,
    assembler: ChatAssembler,
    stops: StopStrings,
    payload: Any,
    prompt_tokens: int,
    dropped_ids: frozenset[int] | None = None,
    *,
    top_logprobs: int | None = None,
) -> dict[str, Any]:
    """A whole (non-streamed) answer as one chat completion; ids we detokenize are cut at
    the first stop string (``app.upstream.stops``)."""
    generated = dialect.response(payload, prompt_tokens)
    text = generated.text
    if dialect.tokens_out:
        dropped = dropped_ids or frozenset()
        ids = [t for t in generated.token_ids if t not in dropped]
        # decode_batch releases the GIL (decode holds it: ~30 ms for 400K ids)
        decoded = tokenizer.decode_batch([ids], skip_special_tokens=dropped_ids is None)[0]
        text = trimmed(str(decoded), stops)
    completion = assembler.completion(
        text,
        finished(generated.finish_reason),
        generated.usage or Usage(prompt_tokens, 0),
        generated.stop_sequence,
    )
    logprobs = ChatLogprobs(top_logprobs)
    logprobs.add(spelled(generated.logprobs, tokenizer))
    return logprobs.completed(completion)


def spelled(tokens: tuple[TokenLogprob, ...], tokenizer: Tokenizer) -> list[TokenLogprob]:
    """``tokens`` with the text and bytes of those a tokens-out upstream reported by id only:
    the token decoded alone, as vLLM's chat API spells its log probabilities."""
    out = []
    for token in tokens:
        if token.token_id is not None:
            text = str(tokenizer.decode([token.token_id], skip_special_tokens=False))
            top = tuple(spelled(token.top, tokenizer))
            token = replace(token, token=text, bytes=text.encode(), top=top)
        out.append(token)
    return out


def finished(reason: str | None) -> str:
    """The upstream's finish reason; an answer without one was cut short."""
    if reason is None:
        raise UpstreamTruncatedError(
            "the upstream's answer ended without a finish reason: it was cut short"
        )
    return reason
