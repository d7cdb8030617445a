"""The models the stand-in upstream plays for the agent tests: each one's chat template and
tokenizer, and how it writes a tool call and an answer (reasoning and markers included, as the
text a server returns with special tokens kept).

A model whose own tokenizer is not offline is played with a tokenizer of its family
(docs/assets.md, "Models"): GLM-4.7 with Llama-3.1's, whose vocabulary has none of GLM's
markers, so they are plain text in its prompts and answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Arguments = Mapping[str, Any]
THOUGHT = "Let me see."
"""The reasoning a model writes where its prompt opened reasoning."""


@dataclass(frozen=True)
class Model:
    name: str
    user_turn: str
    """What begins a user turn in its prompts (scripted answers read the last one on)."""
    call: Callable[[str, Arguments], str]
    """A tool call (name, arguments) as the model writes one."""
    final: Callable[[str], str] = str
    """A final text answer as the model writes it."""
    opened: str | None = None
    """How a prompt that opened the model's reasoning ends (None: it writes none here)."""
    thought: Callable[[str], str] = str
    """Reasoning as the model writes it after such a prompt, closed."""
    tokenizer: str = "qwen3"
    """The asset name of its tokenizer folder (``qwen3``, else one under ``models/``)."""
    template: str | None = None
    """The stem of its chat template among the template assets; None: the tokenizer's own."""
    content_format: Literal["string", "openai"] = "string"
    """vLLM's content format for the template (tests/rendering/test_real_templates.py)."""
    serve: tuple[str, ...] = ()
    """Extra arguments of ``toksplice serve`` for it."""

    def reply(self, prompt: str, said: str) -> str:
        """The whole answer to ``prompt`` that says ``said``: a little reasoning first where
        the prompt opened it."""
        opened = self.opened is not None and prompt.endswith(self.opened)
        return (self.thought(THOUGHT) if opened else "") + said


def hermes_call(name: str, arguments: Arguments) -> str:
    """A tool call as Qwen3 writes one."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


QWEN3 = Model("qwen3", "<|im_start|>user", hermes_call, serve=("--tool-format", "hermes"))

# The tool format: auto, from the template.  The billing line kept (its ``auto`` strips it for
# vLLM): Claude Code's continuation then repairs its edit (tests/agents/test_claude_code_vllm.py
# runs the stripped default).
_VLLM = ("--dialect", "vllm-completions", "--strip-billing-line", "off")


def _closed_think(reasoning: str) -> str:
    return reasoning + "</think>"


GLM47 = Model(
    "glm-4.7",
    "<|user|>",
    lambda name, arguments: "<tool_call>" + name + "".join(
        f"<arg_key>{key}</arg_key><arg_value>"
        f"{value if isinstance(value, str) else json.dumps(value)}</arg_value>"
        for key, value in arguments.items()
    ) + "</tool_call>",
    opened="<think>",
    thought=_closed_think,
    tokenizer="llama3_1",
    template="GLM-4.7-Flash",
    content_format="openai",
    serve=_VLLM,
)  # fmt: skip

# Harmony: every answer follows the prompt's ``<|start|>assistant``, reasoning on the analysis
# channel; ``<|call|>`` and ``<|return|>`` are stop tokens, which a server leaves out of the text.
GPT_OSS = Model(
    "gpt-oss-120b",
    "<|start|>user",
    lambda name, arguments: (
        f"<|channel|>commentary to=functions.{name} <|constrain|>json"
        f"<|message|>{json.dumps(arguments)}"
    ),
    final=lambda text: "<|channel|>final<|message|>" + text,
    opened="<|start|>assistant",
    thought=lambda reasoning: f"<|channel|>analysis<|message|>{reasoning}<|end|><|start|>assistant",
    tokenizer="gpt_oss",
    template="openai-gpt-oss-120b",
    serve=_VLLM,
)

DEEPSEEK_V31 = Model(
    "deepseek-v3.1",
    "<｜User｜>",
    lambda name, arguments: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" + name
    + "<｜tool▁sep｜>" + json.dumps(arguments) + "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    opened="<think>",
    thought=_closed_think,
    tokenizer="deepseek_v4",
    template="deepseek-ai-DeepSeek-V3.1",
    serve=_VLLM,
)  # fmt: skip

FORMATS = (GLM47, GPT_OSS, DEEPSEEK_V31)
"""The non-Qwen formats the agents run through the proxy with."""
