"""OpenAI chat output -> OpenAI Responses objects and stream events.

``ResponseStream`` turns ``ChatService.chunks``' chat chunk dicts into Responses events, each
with its ``sequence_number``: ``response.created``, ``response.in_progress``, then per output
item ``response.output_item.added`` ... ``response.output_item.done`` and finally
``response.completed`` (``response.incomplete`` when the token limit cut the answer,
``response.failed`` when the upstream failed mid-answer; no ``[DONE]``).  Inside the items:

- reasoning (``reasoning_content``): a ``reasoning`` item whose ``summary`` holds the model's
  thinking as one ``summary_text`` part, streamed as ``response.reasoning_summary_part.added``,
  ``response.reasoning_summary_text.delta``/``.done``, ``response.reasoning_summary_part.done``.
  The summary events, not ``response.reasoning_text.*``: clients such as Codex show summaries
  by default and resend the item next turn, which ``responses_request`` turns back into
  ``reasoning_content``.
- text: a ``message`` item, ``response.content_part.added``, ``response.output_text.delta``
  ..., ``response.output_text.done``, ``response.content_part.done``.
- tool calls: a ``function_call`` item per call (``id`` "fc_...", ``call_id`` the chat call
  id), ``response.function_call_arguments.delta`` ... ``.done``.

``response_from_completion`` builds the same Response object from a chat completion.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

Event = tuple[str, dict[str, Any]]


def _ident(prefix: str) -> str:
    return prefix + uuid.uuid4().hex


def response_echo(body: dict[str, Any]) -> dict[str, Any]:
    """The request fields a Response object repeats."""
    tools = [t for t in body.get("tools") or () if isinstance(t, dict)]
    return {
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "prompt_cache_key": body.get("prompt_cache_key"),
        "reasoning": body.get("reasoning"),
        "store": False,
        "temperature": body.get("temperature"),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": tools,
        "top_p": body.get("top_p"),
        "metadata": body.get("metadata"),
    }


def response_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Chat usage -> Responses usage (``input_tokens`` are the ids the proxy sent)."""
    if usage is None:
        return None
    prompt = int(usage.get("prompt_tokens") or 0)
    output = int(usage.get("completion_tokens") or 0)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "total_tokens": prompt + output,
    }


class _Item:
    """One output item being streamed."""

    def __init__(self, kind: str, index: int, call_id: str = "", name: str = "") -> None:
        self.kind = kind
        self.index = index
        self.ident = _ident({"reasoning": "rs_", "message": "msg_", "function_call": "fc_"}[kind])
        self.call_id = call_id
        self.name = name
        self.text: list[str] = []

    def value(self, status: str) -> dict[str, Any]:
        text = "".join(self.text)
        if self.kind == "reasoning":
            summary = [{"type": "summary_text", "text": text}] if status != "in_progress" else []
            return {"id": self.ident, "type": "reasoning", "summary": summary, "status": status}
        if self.kind == "message":
            content = [_output_text(text)] if status != "in_progress" else []
            return {
                "id": self.ident,
                "type": "message",
                "role": "assistant",
                "status": status,
                "content": content,
            }
        return {
            "id": self.ident,
            "type": "function_call",
            "call_id": self.call_id,
            "name": self.name,
            "arguments": text if status != "in_progress" else "",
            "status": status,
        }


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


class ResponseStream:
    """Chat chunks in, Responses events out, for one response."""

    def __init__(self, *, model: str, echo: dict[str, Any]) -> None:
        self.ident = _ident("resp_")
        self.created_at = int(time.time())
        self.model = model
        self.echo = echo
        self.sequence = 0
        self.items: list[_Item] = []
        self.done: list[dict[str, Any]] = []
        self.current: _Item | None = None
        self.tool_index: int | None = None
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None

    def response(self, status: str, **extra: Any) -> dict[str, Any]:
        """The Response object as it stands."""
        return {
            "id": self.ident,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": list(self.done),
            "usage": None,
            "error": None,
            "incomplete_details": None,
            **self.echo,
            **extra,
        }

    def _event(self, kind: str, **fields: Any) -> Event:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return kind, payload

    def start(self) -> list[Event]:
        return [
            self._event("response.created", response=self.response("in_progress")),
            self._event("response.in_progress", response=self.response("in_progress")),
        ]

    def feed(self, chunk: dict[str, Any]) -> list[Event]:
        """The events one chat chunk adds."""
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        events: list[Event] = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                events += self._text("reasoning", reasoning)
            if delta.get("content"):
                events += self._text("message", delta["content"])
            for call in delta.get("tool_calls") or ():
                events += self._tool_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return events

    def finish(self) -> list[Event]:
        """Close the open item; ``response.completed`` or ``response.incomplete``.  An answer
        with no output at all is one empty message, as OpenAI's is."""
        events = [] if self.done or self.current else self._open(_Item("message", 0))
        events += self._close()
        if self.finish_reason == "length":
            response = self.response(
                "incomplete",
                incomplete_details={"reason": "max_output_tokens"},
                usage=response_usage(self.usage),
            )
            return [*events, self._event("response.incomplete", response=response)]
        response = self.response("completed", usage=response_usage(self.usage))
        return [*events, self._event("response.completed", response=response)]

    def fail(self, message: str, code: str) -> list[Event]:
        """``response.failed``, closing the open item as incomplete."""
        events = self._close("incomplete")
        error = {"code": code, "message": message}
        response = self.response("failed", error=error, usage=response_usage(self.usage))
        return [*events, self._event("response.failed", response=response)]

    def _open(self, item: _Item) -> list[Event]:
        events = self._close()
        self.current = item
        events.append(
            self._event(
                "response.output_item.added",
                output_index=item.index,
                item=item.value("in_progress"),
            )
        )
        if item.kind == "reasoning":
            events.append(
                self._event(
                    "response.reasoning_summary_part.added",
                    item_id=item.ident,
                    output_index=item.index,
                    summary_index=0,
                    part={"type": "summary_text", "text": ""},
                )
            )
        elif item.kind == "message":
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=item.ident,
                    output_index=item.index,
                    content_index=0,
                    part=_output_text(""),
                )
            )
        return events

    def _text(self, kind: str, text: str) -> list[Event]:
        events: list[Event] = []
        item = self.current
        if item is None or item.kind != kind:
            item = _Item(kind, len(self.done) + (self.current is not None))
            events += self._open(item)
        item.text.append(text)
        if kind == "reasoning":
            events.append(
                self._event(
                    "response.reasoning_summary_text.delta",
                    item_id=item.ident,
                    output_index=item.index,
                    summary_index=0,
                    delta=text,
                )
            )
        else:
            events.append(
                self._event(
                    "response.output_text.delta",
                    item_id=item.ident,
                    output_index=item.index,
                    content_index=0,
                    delta=text,
                    logprobs=[],
                )
            )
        return events

    def _tool_call(self, call: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        function = call.get("function") or {}
        item = self.current
        if item is None or item.kind != "function_call" or call.get("index") != self.tool_index:
            item = _Item(
                "function_call",
                len(self.done) + (self.current is not None),
                call_id=call.get("id") or _ident("call_"),
                name=function.get("name") or "",
            )
            events += self._open(item)
            self.tool_index = call.get("index")
        arguments = function.get("arguments")
        if arguments:
            item.text.append(arguments)
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item.ident,
                    output_index=item.index,
                    delta=arguments,
                )
            )
        return events

    def _close(self, status: str = "completed") -> list[Event]:
        item, self.current = self.current, None
        if item is None:
            return []
        text = "".join(item.text)
        common = {"item_id": item.ident, "output_index": item.index}
        events: list[Event] = []
        if item.kind == "reasoning":
            events.append(
                self._event(
                    "response.reasoning_summary_text.done", **common, summary_index=0, text=text
                )
            )
            events.append(
                self._event(
                    "response.reasoning_summary_part.done",
                    **common,
                    summary_index=0,
                    part={"type": "summary_text", "text": text},
                )
            )
        elif item.kind == "message":
            events.append(
                self._event(
                    "response.output_text.done", **common, content_index=0, text=text, logprobs=[]
                )
            )
            events.append(
                self._event(
                    "response.content_part.done", **common, content_index=0, part=_output_text(text)
                )
            )
        else:
            events.append(
                self._event("response.function_call_arguments.done", **common, arguments=text)
            )
        value = item.value(status)
        self.done.append(value)
        events.append(self._event("response.output_item.done", output_index=item.index, item=value))
        return events


def response_from_completion(
    completion: dict[str, Any], *, model: str, echo: dict[str, Any]
) -> dict[str, Any]:
    """A non-streamed chat completion as one Response object."""
    stream = ResponseStream(model=model, echo=echo)
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    delta = {
        "reasoning_content": message.get("reasoning_content") or message.get("reasoning"),
        "content": message.get("content"),
        "tool_calls": [
            dict(call, index=k) for k, call in enumerate(message.get("tool_calls") or ())
        ],
    }
    stream.feed(
        {
            "choices": [{"delta": delta, "finish_reason": choice.get("finish_reason")}],
            "usage": completion.get("usage"),
        }
    )
    final = stream.finish()[-1][1]["response"]
    assert isinstance(final, dict)
    return final
