"""Reasoning and tool calls out of generated text, for token-in text-out upstreams.

llama.cpp, vLLM ``/v1/completions`` and SGLang ``/generate`` return the model's raw text;
``OutputParser`` turns it into OpenAI chat fields, streaming (``feed``/``finish`` give
``ChatDelta``s whose ``to_openai()`` is a ``chat.completion.chunk`` delta) or at once
(``parse`` gives a ``ParsedOutput``). One parser per generated choice.

Choices, and why:

- Reasoning is the text between ``<think>`` and ``</think>``, verbatim: vLLM's Qwen3 reasoning
  parser strips no newlines either (``"<think>\\nx\\n</think>\\n\\ny"`` gives reasoning
  ``"\\nx\\n"`` and content ``"\\n\\ny"``), and Qwen3's chat template strips them itself when
  the message comes back. ``starts_in_reasoning`` is for prompts that already opened
  ``<think>``; otherwise only a ``<think>`` opening the output starts reasoning. Output cut
  off inside reasoning is all reasoning (as in vLLM).
- A tool call is emitted whole at its closing tag. Text that is not a well-formed tool call
  (bad JSON, unknown layout, cut off by ``max_tokens``) is content, tags and all: model output
  is never lost. Only whitespace-only gaps that touch tool calls are dropped as layout.
- ``</tool_call>`` inside a Hermes JSON string or a Qwen3-Coder parameter value is text.
"""

from app.protocol.output.deltas import ChatDelta, ParsedOutput, ToolCall, ToolCallDelta
from app.protocol.output.parser import OutputParser, new_tool_call_id

__all__ = [
    "ChatDelta",
    "OutputParser",
    "ParsedOutput",
    "ToolCall",
    "ToolCallDelta",
    "new_tool_call_id",
]
