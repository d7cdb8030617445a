"""Claude Code and Codex through ``toksplice serve`` with models that do not write Qwen's
format: GLM-4.7, gpt-oss (harmony) and DeepSeek V3.1, each on its real chat template
(``--tool-format`` left at ``auto``, vLLM's completions dialect). The stand-in upstream writes
a tool call the way the model does (special-token markers as text, which it leaves out unless
the proxy asks to keep them, as vLLM does); the CLI runs the call, sends its result back, and
the proxy repairs that continuation. Every prompt equals transformers' rendering of the
model's template, encoded by its tokenizer (``harness.check``; GLM-4.7's tokenizer is not
offline, Llama-3.1's stands in: ``models``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.tools import assets as app_assets
from tests.agents import test_claude_code as claude_code
from tests.agents import test_codex as codex_cli
from tests.agents.harness import Stack, claude_env, codex_env, stack
from tests.agents.models import FORMATS, THOUGHT, Model

MARKER = "toksplice-42"
COMMAND = "echo toksplice-$((6*7))"


@pytest.fixture(scope="module", params=FORMATS, ids=lambda model: model.name)
def served(
    request: pytest.FixtureRequest, clis: dict[str, Path], assets_dir: Path
) -> Iterator[Stack]:
    """One stand-in playing the model, proxy and front, shared by both CLIs' tests."""
    model: Model = request.param
    assert model.template is not None
    folder = app_assets.models(assets_dir)[model.tokenizer].parent
    template = app_assets.templates(assets_dir)[model.template]
    with stack(folder, model=model, template=template) as served_:
        yield served_


def reasoned(served: Stack) -> list[str]:
    """The reasoning the client must send back with the tool call: what the model wrote
    before it, where the first call's prompt opened reasoning (DeepSeek V3.1's does only
    when asked to)."""
    answer = served.answers[-2]  # each run makes two model calls
    return [THOUGHT] if answer.startswith(served.model.thought(THOUGHT)) else []


def test_claude_code_runs_the_models_tool_call(
    clis: dict[str, Path], served: Stack, tmp_path: Path
) -> None:
    model, arguments = served.model, {"command": COMMAND, "description": "Print the marker"}
    rules = [(MARKER, model.final(f"It printed {MARKER}.")),
             ("Run the marker", model.call("Bash", arguments))]  # fmt: skip
    environment = claude_env(tmp_path / "home", served.url, model=model.name,
                             context=claude_code.CONTEXT, output=claude_code.OUTPUT)  # fmt: skip
    out, calls = claude_code.claude(clis, served, environment, tmp_path, rules,
                                    "Run the marker", "--allowedTools", "Bash")  # fmt: skip
    assert out.strip() == f"It printed {MARKER}."
    first, second = claude_code.messages(calls)
    assert first.route == "full" and second.route in ("append", "edit")
    turn, result = second.body["messages"][-2:]
    (use,) = [b for b in turn["content"] if b["type"] == "tool_use"]
    assert (use["name"], use["input"]) == ("Bash", arguments)
    assert result["content"][0]["tool_use_id"] == use["id"]
    assert MARKER in str(result["content"][0]["content"])
    # it asks for thinking, which each of these templates then opens: the reasoning comes back
    assert [b["thinking"] for b in turn["content"] if b["type"] == "thinking"] == [THOUGHT]


def test_codex_runs_the_models_tool_call(
    clis: dict[str, Path], served: Stack, tmp_path: Path
) -> None:
    model, arguments = served.model, {"cmd": COMMAND}
    rules = [(MARKER, model.final(f"It printed {MARKER}.")),
             ("Run the marker", model.call("exec_command", arguments))]  # fmt: skip
    environment = codex_env(tmp_path / "home", served.url, model=model.name)
    out, calls = codex_cli.codex(clis, served, environment, tmp_path, rules, "Run the marker")
    assert out.strip() == f"It printed {MARKER}."
    first, second = calls
    assert first.route == "full" and second.route in ("append", "edit")
    (call,) = [i for i in second.body["input"] if i.get("type") == "function_call"]
    output = second.body["input"][-1]
    assert (call["name"], call["call_id"]) == ("exec_command", output["call_id"])
    assert output["type"] == "function_call_output" and MARKER in str(output["output"])
    items = [i for i in second.body["input"] if i.get("type") == "reasoning"]
    assert [s["text"] for i in items for s in i["summary"]] == reasoned(served)
