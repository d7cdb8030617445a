"""Chat markups: the strings a chat template puts around turns, keyed like the tokenizers."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Markup:
    """The strings a chat template puts around turns.

    ``start(role)`` opens a turn and ``end`` closes it (``end_for`` applies per-role
    overrides, e.g. DeepSeek-V3 only closes assistant turns).  ``generation_prompt`` is the
    assistant start a chat server appends at the end of each call's transcript.  The tool
    fields describe how tool calls and tool results are rendered.
    """

    name: str
    start_fmt: str
    end: str
    bos: str = ""
    role_tags: tuple[tuple[str, str], ...] = ()
    role_ends: tuple[tuple[str, str], ...] = ()
    tool_role: str = "tool"
    group_tool_results: bool = False
    tool_results_open: str = ""
    tool_results_close: str = ""
    tool_result_open: str = ""
    tool_result_close: str = ""
    tool_result_sep: str = ""
    tool_calls_open: str = ""
    tool_call_fmt: str = "{json}"
    tool_call_sep: str = "\n"
    tool_calls_close: str = ""
    content_tool_sep: str = "\n"
    args_key: str = "arguments"
    think_open: str = "<think>\n"
    think_close: str = "\n</think>\n\n"

    def start(self, role: str) -> str:
        """Opening markup of a turn of ``role``."""
        tag = role
        for r, t in self.role_tags:
            if r == role:
                tag = t
                break
        return self.start_fmt.replace("{role}", tag)

    def end_for(self, role: str) -> str:
        """Closing markup of a turn of ``role`` (``end`` unless overridden)."""
        for r, e in self.role_ends:
            if r == role:
                return e
        return self.end

    @property
    def generation_prompt(self) -> str:
        """The assistant start appended after the last turn of every call."""
        return self.start("assistant")


_CHATML = Markup(
    name="qwen3",
    start_fmt="<|im_start|>{role}\n",
    end="<|im_end|>\n",
    tool_role="user",
    group_tool_results=True,
    tool_result_open="<tool_response>\n",
    tool_result_close="\n</tool_response>",
    tool_result_sep="\n",
    tool_call_fmt="<tool_call>\n{json}\n</tool_call>",
)

_LLAMA3 = Markup(
    name="llama3",
    start_fmt="<|start_header_id|>{role}<|end_header_id|>\n\n",
    end="<|eot_id|>",
    bos="<|begin_of_text|>",
    tool_role="ipython",
    args_key="parameters",
)

_DEEPSEEK_V3 = Markup(
    name="deepseek_v3",
    start_fmt="{role}",
    end="<｜end▁of▁sentence｜>",
    bos="<｜begin▁of▁sentence｜>",
    role_tags=(
        ("system", ""),
        ("user", "<｜User｜>"),
        ("assistant", "<｜Assistant｜>"),
        ("tool", ""),
    ),
    role_ends=(("system", ""), ("user", ""), ("tool", "")),
    group_tool_results=True,
    tool_results_open="<｜tool▁outputs▁begin｜>",
    tool_results_close="<｜tool▁outputs▁end｜>",
    tool_result_open="<｜tool▁output▁begin｜>",
    tool_result_close="<｜tool▁output▁end｜>",
    tool_calls_open="<｜tool▁calls▁begin｜>",
    tool_call_fmt="<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args}\n```"
    "<｜tool▁call▁end｜>",
    tool_calls_close="<｜tool▁calls▁end｜>",
)


_MISTRAL = Markup(
    name="tekken",
    start_fmt="{role}",
    end="",
    bos="<s>",
    role_tags=(
        ("system", "[SYSTEM_PROMPT]"),
        ("user", "[INST]"),
        ("assistant", ""),
        ("tool", "[TOOL_RESULTS]"),
    ),
    role_ends=(
        ("system", "[/SYSTEM_PROMPT]"),
        ("user", "[/INST]"),
        ("assistant", "</s>"),
        ("tool", "[/TOOL_RESULTS]"),
    ),
    tool_call_fmt="[TOOL_CALLS]{name}[ARGS]{args}",
    tool_call_sep="",
)

_GEMMA = Markup(
    name="gemma3",
    start_fmt="<start_of_turn>{role}\n",
    end="<end_of_turn>\n",
    bos="<bos>",
    role_tags=(("system", "user"), ("assistant", "model"), ("tool", "user")),
    tool_call_fmt="```tool_code\n{json}\n```",
)


_GLM = Markup(
    name="glm",
    start_fmt="<|{role}|>\n",
    end="",
    bos="[gMASK]<sop>",
    role_tags=(("tool", "observation"),),
    tool_role="tool",
    group_tool_results=True,
    tool_result_open="<tool_response>",
    tool_result_close="</tool_response>",
    tool_call_fmt="<tool_call>{name}\n<arg_key>input</arg_key>\n<arg_value>{args}</arg_value>\n"
    "</tool_call>",
    think_open="<think>",
    think_close="</think>\n",
)


_KIMI = Markup(
    name="kimi",
    start_fmt="{role}<|im_middle|>",
    end="<|im_end|>",
    role_tags=(
        ("system", "<|im_system|>system"),
        ("user", "<|im_user|>user"),
        ("assistant", "<|im_assistant|>assistant"),
        ("tool", "<|im_system|>tool"),
    ),
    tool_calls_open="<|tool_calls_section_begin|>",
    tool_call_fmt="<|tool_call_begin|>functions.{name}:0<|tool_call_argument_begin|>{args}"
    "<|tool_call_end|>",
    tool_call_sep="",
    tool_calls_close="<|tool_calls_section_end|>",
)


def _plain(name: str) -> Markup:
    return Markup(
        name=name,
        start_fmt="### {role}:\n",
        end="\n<|endoftext|>\n",
        tool_call_fmt="<tool_call>\n{json}\n</tool_call>",
    )


MARKUPS: dict[str, Markup] = {
    "qwen3": _CHATML,
    "llama3": _LLAMA3,
    "deepseek_v3": _DEEPSEEK_V3,
    "gpt2": _plain("gpt2"),
    "cl100k": _plain("cl100k"),
    "o200k": _plain("o200k"),
    "smollm2": replace(_CHATML, name="smollm2"),
    "tekken": _MISTRAL,
    "qwen35": replace(_CHATML, name="qwen35"),
    "gemma3": _GEMMA,
    "glm": _GLM,
    "kimi": _KIMI,
}
