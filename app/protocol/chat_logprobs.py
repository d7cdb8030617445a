"""Log probabilities in OpenAI chat form: ``choices[0].logprobs.content``, one entry per output
token with its ``token``, ``logprob``, ``bytes`` and ``top_logprobs`` (the likeliest
alternatives, as many as the client's ``top_logprobs``).

A stream's tokens go on the first chunk made from the upstream event that carried them; an
event whose text is held back (a tool call being parsed, a possible stop string) hands its
tokens on to the next chunk, so every token reaches the client once and in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.generation import TokenLogprob


class ChatLogprobs:
    """The log probabilities of one answer; ``top`` is the client's ``top_logprobs`` (None:
    not asked for, and nothing is added)."""

    def __init__(self, top: int | None) -> None:
        self._top = top
        self._pending: list[dict[str, Any]] = []

    def add(self, tokens: Iterable[TokenLogprob]) -> None:
        if self._top is not None:
            self._pending += (_entry(t, self._top) for t in tokens)

    def attach(self, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``chunks`` with the tokens so far on the first that has a choice."""
        if self._top is None:
            return chunks
        for chunk in chunks:
            if chunk.get("choices"):
                chunk["choices"][0]["logprobs"] = {"content": self._pending}
                self._pending = []
                break
        return chunks

    def completed(self, completion: dict[str, Any]) -> dict[str, Any]:
        """A whole chat completion with all the tokens."""
        return self.attach([completion])[0]


def _entry(token: TokenLogprob, top: int) -> dict[str, Any]:
    alternatives = [
        {"token": t.token, "logprob": t.logprob, "bytes": list(t.bytes)} for t in token.top[:top]
    ]
    return {
        "token": token.token,
        "logprob": token.logprob,
        "bytes": list(token.bytes),
        "top_logprobs": alternatives,
    }
