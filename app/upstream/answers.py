"""The upstream's answers, read field by field with their types checked.

Every dialect reads the JSON an upstream sent through ``Answer``: a field of the wrong type
(a list for an object, a number for a text, a text for a count) raises
``UpstreamMalformedError`` naming the field, which the client gets as a 502 in its own format,
or mid-stream as its API's error event, never as a 500 or a cut stream.  A missing or null
field reads as absent.  ``chat_answer`` does the same for the OpenAI chat answers that a
chat-native upstream's replies are passed through as.
"""

from __future__ import annotations

from typing import Any

from app.errors import UpstreamMalformedError, UpstreamUnavailableError

FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})
"""The finish reasons a chat client may be sent: OpenAI's."""
_FAILED = frozenset({"abort", "error"})
"""vLLM's finish reasons of a request that failed in the engine: no answer, an error."""
_ID_BOUND = 1 << 31
"""Token ids are below it (a larger one overflows the detokenizer)."""


class Answer:
    """One JSON object of an upstream's answer; ``where`` names it in error messages."""

    __slots__ = ("_fields", "_where")

    def __init__(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _malformed(where, "an object", value)
        self._fields: dict[str, Any] = value
        self._where = where

    @property
    def fields(self) -> dict[str, Any]:
        return self._fields

    def raw(self, key: str) -> Any:
        """The field as sent, for checks of their own (``stop_string``)."""
        return self._fields.get(key)

    def has(self, key: str) -> bool:
        return self._fields.get(key) is not None

    def object(self, key: str) -> Answer:
        """A nested object; an empty one when absent."""
        value = self._fields.get(key)
        return Answer({} if value is None else value, self._at(key))

    def objects(self, key: str) -> list[Answer]:
        """A list of objects; empty when absent."""
        return [Answer(v, f"{self._at(key)}[{i}]") for i, v in enumerate(self._list(key))]

    def first(self, key: str) -> Answer:
        """The first object of a list (a completion's first choice); an empty one when none."""
        items = self._list(key)
        return Answer(items[0] if items else {}, f"{self._at(key)}[0]")

    def text(self, key: str) -> str:
        """A string; empty when absent."""
        return self.optional_text(key) or ""

    def optional_text(self, key: str) -> str | None:
        value = self._fields.get(key)
        if value is None or isinstance(value, str):
            return value
        raise _malformed(self._at(key), "a string", value)

    def count(self, key: str) -> int | None:
        """A non-negative integer (a token count); None when absent."""
        value = self._fields.get(key)
        if value is None or (_is_int(value) and value >= 0):
            return value
        raise _malformed(self._at(key), "a non-negative integer", value)

    def flag(self, key: str) -> bool:
        value = self._fields.get(key)
        if value is None or isinstance(value, bool):
            return bool(value)
        raise _malformed(self._at(key), "a boolean", value)

    def ids(self, key: str) -> tuple[int, ...]:
        """A list of token ids; empty when absent."""
        ids = self._list(key)
        if all(_is_int(i) and 0 <= i < _ID_BOUND for i in ids):
            return tuple(ids)
        raise _malformed(self._at(key), "a list of token ids", ids)

    def finish_reason(self, key: str = "finish_reason") -> str | None:
        """One of ``FINISH_REASONS``, or None while the answer goes on; vLLM's "abort" and
        "error" are the upstream failing the request."""
        value = self._fields.get(key)
        if value is None or value in FINISH_REASONS:
            return value
        if value in _FAILED:
            raise UpstreamUnavailableError(f"the upstream ended the answer with {value!r}")
        raise _malformed(self._at(key), f"one of {sorted(FINISH_REASONS)}", value)

    def _list(self, key: str) -> list[Any]:
        value = self._fields.get(key)
        if value is None:
            return []
        if isinstance(value, list):
            return value
        raise _malformed(self._at(key), "a list", value)

    def _at(self, key: str) -> str:
        return f"{self._where}.{key}"


def chat_answer(payload: Any, *, chunk: bool) -> dict[str, Any]:
    """An OpenAI chat completion (or ``chunk``) from a chat-native upstream, checked in every
    field the client APIs' encoders read; returned as sent."""
    answer = Answer(payload, "chunk" if chunk else "completion")
    for choice in answer.objects("choices"):
        choice.finish_reason()
        message = choice.object("delta" if chunk else "message")
        for key in ("content", "reasoning_content", "reasoning", "refusal"):
            message.optional_text(key)
        for call in message.objects("tool_calls"):
            if chunk:
                call.count("index")
            call.optional_text("id")
            function = call.object("function")
            function.optional_text("name")
            function.optional_text("arguments")
    usage(answer)
    return answer.fields


def usage(answer: Answer) -> tuple[int | None, int | None]:
    """(completion tokens, cached prompt tokens) of an OpenAI-style ``usage``, checked."""
    figures = answer.object("usage")
    for key in ("prompt_tokens", "total_tokens"):
        figures.count(key)
    cached = figures.object("prompt_tokens_details").count("cached_tokens")
    return figures.count("completion_tokens"), cached


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _malformed(where: str, wanted: str, value: Any) -> UpstreamMalformedError:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return UpstreamMalformedError(
        f"the upstream's answer is malformed: {where} should be {wanted}, not {shown}"
    )
