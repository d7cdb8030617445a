"""The streamed output parser's cost per output token, for every tool format.

    python loadtest/bench_output_parsers.py [--repeat 30] [--formats glm47,harmony,...]

Each format gets one answer written the way its model writes it: reasoning (~1 KB), a
sentence of content, then two tool calls, one writing a ~2 KB Python file (quotes,
backslashes, newlines, the format's own closing marker in a string) and one small. The answer
is cut at the Qwen3 tokenizer's token boundaries (``.assets/qwen3``; a format's special-token
markers span several of those pieces, so the count errs high and the cost per token low by
that much) and fed piece by piece to a fresh parser, then ``finish``; the whole answer is
also parsed at once. Printed per format: tokens, and the median over ``--repeat`` runs of
nanoseconds of CPU time (this thread's: a busy machine's waits for a core are not counted)
per token, streamed and parsed whole. A run that does not find both calls, changes the
file's text or leaves a marker in the content exits 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from app.generation import ToolFormat
from app.protocol.output import FORMATS, ParsedOutput, output_parser

QWEN3 = Path(__file__).resolve().parents[1] / ".assets" / "qwen3" / "tokenizer.json"
REASONING = (
    "The user wants the parser module rewritten so that it streams. First I should read the "
    "existing code, then write the new file, then run the tests. "
) * 8
CONTENT = "I'll write the new module and run its tests."
CODE = (
    'def parse(text: str) -> list[str]:\n    """Split on \\"</tool_call>\\" markers."""\n'
    "    out = []\n    for line in text.splitlines():\n"
    "        if line.startswith('#'):\n            continue\n"
    "        out.append(line.replace('\\\\', '/'))\n    return out\n\n"
) * 8
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"path": "app/parser.py", "content": CODE, "mode": 420}),
    ("run_tests", {"path": "tests/test_parser.py", "verbose": True}),
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {
                    key: {"type": {str: "string", bool: "boolean", int: "integer"}[type(value)]}
                    for key, value in arguments.items()
                },
            },
        },
    }
    for name, arguments in CALLS
]


def _raw(value: Any) -> str:
    """A value as the XML-like formats write it: strings bare, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _gemma(value: Any) -> str:
    return f'<|"|>{value}<|"|>' if isinstance(value, str) else json.dumps(value)


def _python(value: Any) -> str:
    return repr(value)


Writer = Callable[[str, dict[str, Any]], str]
D = "｜DSML｜"
WRITERS: dict[str, Writer] = {
    "hermes": lambda n, a: f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>",
    "qwen3_coder": lambda n, a: (
        f"<tool_call>\n<function={n}>\n"
        + "".join(f"<parameter={k}>\n{_raw(v)}\n</parameter>\n" for k, v in a.items())
        + "</function>\n</tool_call>"
    ),
    "glm45": lambda n, a: (
        f"<tool_call>{n}\n"
        + "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>{_raw(v)}</arg_value>\n" for k, v in a.items()
        )
        + "</tool_call>"
    ),
    "glm47": lambda n, a: (
        f"<tool_call>{n}"
        + "".join(f"<arg_key>{k}</arg_key><arg_value>{_raw(v)}</arg_value>" for k, v in a.items())
        + "</tool_call>"
    ),
    "kimi_k2": lambda n, a: (
        "<|tool_calls_section_begin|><|tool_call_begin|>"
        f"functions.{n}:0<|tool_call_argument_begin|>{json.dumps(a)}"
        "<|tool_call_end|><|tool_calls_section_end|>"
    ),
    "deepseek_v31": lambda n, a: (
        f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{json.dumps(a)}"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    ),
    "deepseek_v32": lambda n, a: (
        f'<{D}function_calls>\n<{D}invoke name="{n}">\n'
        + "".join(
            f'<{D}parameter name="{k}" string="{str(isinstance(v, str)).lower()}">'
            f"{_raw(v)}</{D}parameter>\n"
            for k, v in a.items()
        )
        + f"</{D}invoke>\n</{D}function_calls>"
    ),
    "harmony": lambda n, a: (
        f"<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json"
        f"<|message|>{json.dumps(a)}<|call|>"
    ),
    "minimax_m2": lambda n, a: (
        f'<minimax:tool_call>\n<invoke name="{n}">\n'
        + "".join(f'<parameter name="{k}">{_raw(v)}</parameter>\n' for k, v in a.items())
        + "</invoke>\n</minimax:tool_call>"
    ),
    "mistral": lambda n, a: f"[TOOL_CALLS]{n}[ARGS]{json.dumps(a)}",
    "llama3_json": lambda n, a: f"<|python_tag|>{json.dumps({'name': n, 'parameters': a})}",
    "pythonic": lambda n, a: (
        "<|python_start|>["
        + n
        + "("
        + ", ".join(f"{k}={_python(v)}" for k, v in a.items())
        + ")]<|python_end|>"
    ),
    "gemma4": lambda n, a: (
        f"<|tool_call>call:{n}{{"
        + ",".join(f"{k}:{_gemma(v)}" for k, v in a.items())
        + "}<tool_call|>"
    ),
    "seed_oss": lambda n, a: (
        f"<seed:tool_call>\n<function={n}>\n"
        + "".join(f"<parameter={k}>{_raw(v)}</parameter>\n" for k, v in a.items())
        + "</function>\n</seed:tool_call>"
    ),
}


def answer(fmt: ToolFormat) -> str:
    """Reasoning, content and both calls, as the model of ``fmt`` writes them."""
    calls = [WRITERS[fmt](name, arguments) for name, arguments in CALLS]
    if fmt == "harmony":
        return (
            f"<|channel|>analysis<|message|>{REASONING}<|end|>"
            f"<|start|>assistant<|channel|>commentary<|message|>{CONTENT}<|end|>" + "".join(calls)
        )
    if fmt in ("llama3_json", "pythonic"):  # no reasoning; a call list opens the answer
        return calls[0] + "\n" + calls[1] if fmt == "llama3_json" else "".join(calls)
    markers = FORMATS[fmt].reasoning
    thought = "" if markers is None else f"{markers.open}{REASONING}{markers.close}"
    return thought + CONTENT + "\n" + "\n".join(calls)


def pieces(text: str, tokenizer: Tokenizer) -> list[str]:
    offsets = tokenizer.encode(text, add_special_tokens=False).offsets
    starts = sorted({start for start, _ in offsets} | {0})
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True) if b > a]


def _new(fmt: ToolFormat) -> Any:
    return output_parser(fmt, reasoning=True, tools=TOOLS)


def run(fmt: ToolFormat, text: str, chunks: list[str], repeat: int) -> tuple[float, float]:
    """Median CPU seconds to stream ``chunks`` and to parse ``text`` whole, checked."""
    streamed: list[float] = []
    whole: list[float] = []
    for _ in range(repeat):
        parser = _new(fmt)
        t0 = time.thread_time()
        for chunk in chunks:
            parser.feed(chunk)
        parser.finish()
        t1 = time.thread_time()
        result = _new(fmt).parse(text)
        t2 = time.thread_time()
        streamed.append(t1 - t0)
        whole.append(t2 - t1)
        check(fmt, result)
    return statistics.median(streamed), statistics.median(whole)


def check(fmt: ToolFormat, result: ParsedOutput) -> None:
    names = [call.name for call in result.tool_calls]
    content = result.content or ""
    if names != [name for name, _ in CALLS] or any(c in content for c in "<[|"):
        sys.exit(f"{fmt}: calls {names}, content {content[:80]!r}")
    written = json.loads(result.tool_calls[0].arguments)["content"]
    if written != (CODE.removesuffix("\n") if fmt == "seed_oss" else CODE):  # see seed_oss.py
        sys.exit(f"{fmt}: the file's content came back changed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--formats", default=",".join(WRITERS))
    args = parser.parse_args()
    tokenizer = Tokenizer.from_file(str(QWEN3))
    print(f"{'format':14} {'tokens':>7} {'stream ns/token':>16} {'whole ns/token':>15}")
    for fmt in args.formats.split(","):
        if fmt not in FORMATS:
            print(f"{fmt:14} (not registered)")
            continue
        text = answer(fmt)  # type: ignore[arg-type]
        chunks = pieces(text, tokenizer)
        stream_s, whole_s = run(fmt, text, chunks, args.repeat)  # type: ignore[arg-type]
        n = len(chunks)
        print(f"{fmt:14} {n:7d} {stream_s / n * 1e9:16.0f} {whole_s / n * 1e9:15.0f}")


if __name__ == "__main__":
    main()
