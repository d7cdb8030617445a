"""Upstream output -> OpenAI chat: chunks while streaming, one message when not.

Text from token-in text-out upstreams goes through the tool format's parser (reasoning and
tool calls become their own fields); ``ChatAssembler`` then shapes OpenAI chat completion objects.
"""

from __future__ import annotations

import time
from typing import Any

from app.generation import ToolFormat, Usage
from app.protocol.openai_chat import chat_chunk, chat_completion, completion_id
from app.protocol.output import output_parser
from app.protocol.output.marker_free import marker_free


class ChatAssembler:
    """One generated choice, as OpenAI chat chunks or a chat completion."""

    def __init__(
        self,
        *,
        model: str,
        tools: list[dict[str, Any]] | None,
        tool_format: ToolFormat | None,
        reasoning: bool,
        starts_in_reasoning: bool,
        control_tokens: tuple[str, ...] = (),
    ) -> None:
        """``control_tokens``: the format's markers that are special tokens, never shown."""
        self.model = model
        self.ident = completion_id()
        self.created = int(time.time())
        parser = output_parser(
            tool_format,
            reasoning=reasoning,
            tools=tools,
            tool_calls=bool(tools),
            starts_in_reasoning=starts_in_reasoning and reasoning,
        )
        self.parser = marker_free(parser, control_tokens)

    def first_chunk(self) -> dict[str, Any]:
        return self._chunk({"role": "assistant", "content": ""})

    def chunks(self, text: str) -> list[dict[str, Any]]:
        return [self._chunk(d.to_openai()) for d in self.parser.feed(text)] if text else []

    def last_chunks(
        self,
        finish_reason: str,
        usage: Usage | None,
        include_usage: bool,
        stop_sequence: str | None = None,
    ) -> list[dict[str, Any]]:
        """Held-back text, the chunk with the finish reason, then usage when asked for."""
        out = [self._chunk(d.to_openai()) for d in self.parser.finish()]
        last = self._chunk({}, finish_reason=self.parser.finish_reason(finish_reason))
        out.append(_with_stop_reason(last, stop_sequence))
        if include_usage and usage is not None:
            out.append(
                chat_chunk(
                    ident=self.ident,
                    model=self.model,
                    created=self.created,
                    delta=None,
                    usage=usage.to_openai(),
                )
            )
        return out

    def completion(
        self,
        text: str,
        finish_reason: str,
        usage: Usage | None,
        stop_sequence: str | None = None,
    ) -> dict[str, Any]:
        parsed = self.parser.parse(text)
        message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
        if parsed.reasoning_content is not None:
            message["reasoning_content"] = parsed.reasoning_content
        if parsed.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in parsed.tool_calls]
        completion = chat_completion(
            ident=self.ident,
            model=self.model,
            message=message,
            finish_reason=parsed.finish_reason(finish_reason),
            usage=usage.to_openai() if usage is not None else None,
        )
        return _with_stop_reason(completion, stop_sequence)

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return chat_chunk(
            ident=self.ident,
            model=self.model,
            created=self.created,
            delta=delta,
            finish_reason=finish_reason,
        )


def _with_stop_reason(reply: dict[str, Any], stop_sequence: str | None) -> dict[str, Any]:
    """``reply`` with vLLM's ``stop_reason`` (the stop sequence that ended the text) on its
    choice, when one did."""
    choice = reply["choices"][0]
    if stop_sequence is not None and choice.get("finish_reason") == "stop":
        choice["stop_reason"] = stop_sequence
    return reply
