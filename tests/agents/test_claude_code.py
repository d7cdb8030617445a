"""Claude Code itself (npm, pinned) through ``toksplice serve``, configured only as the README
says: a first call, ``--continue``, a thinking turn, a Bash tool loop, a subagent and
``/context`` (count_tokens).  The model behind the proxy is a stand-in that answers in Qwen3's
format, scripted so the CLI does what each test needs; every prompt it receives is checked
against transformers' rendering (see ``harness.check``).  The tests run in order and share one
proxy and one working directory, so ``--continue`` continues the previous test's session."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.protocol.anthropic_request import to_chat_body
from tests.agents.harness import (
    MODEL,
    Call,
    Stack,
    check,
    claude_env,
    tool_call,
)

CONTEXT = 32768
OUTPUT = 4096
# What 2.1.328 sends, recorded: a change means the client changed under the tests.
MODEL_BETAS = ["claude-code-20250219", "interleaved-thinking-2025-05-14",
               "context-management-2025-06-27", "mid-conversation-tool-changes-2026-07-01",
               "thinking-token-count-2026-05-13", "advanced-tool-use-2025-11-20",
               "effort-2025-11-24"]
COUNT_BETAS = ["claude-code-20250219", "interleaved-thinking-2025-05-14",
               "context-management-2025-06-27", "token-counting-2024-11-01"]


@pytest.fixture(scope="module")
def environment(proxy: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return claude_env(tmp_path_factory.mktemp("claude-home"), proxy.url, context=CONTEXT,
                      output=OUTPUT)


def chat_of(call: Call) -> dict[str, Any]:
    counting = call.path.startswith("/v1/messages/count_tokens")
    return to_chat_body(call.body, counting=counting).body


def transcript(call: Call) -> tuple[str, ...]:
    return (call.headers.get("x-claude-code-session-id", ""),
            call.headers.get("x-claude-code-agent-id", ""))


def claude(clis: dict[str, Path], proxy: Stack, environment: dict[str, str], workdir: Path,
           rules: list[tuple[str, str]], *args: str) -> tuple[str, list[Call]]:
    """Run ``claude -p ARGS`` with the stand-in scripted by ``rules``; its stdout and calls,
    after ``check``."""
    proxy.answer_by(rules)
    done = subprocess.run([str(clis["claude"]), "-p", *args], env=environment, cwd=workdir,
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    calls = check(proxy, chat_of, transcript)  # its HEAD /api/hello probe included
    return done.stdout, calls


def messages(calls: list[Call]) -> list[Call]:
    return [c for c in calls if c.path.split("?")[0] == "/v1/messages"]


def test_first_call(clis: dict[str, Path], proxy: Stack, environment: dict[str, str],
                    workdir: Path) -> None:
    out, calls = claude(clis, proxy, environment, workdir, [], "Say hello")
    assert out.strip() == "Hello."
    (call,) = messages(calls)
    assert call.path == "/v1/messages?beta=true" and call.route == "full"
    assert call.body["model"] == MODEL and call.body["max_tokens"] == OUTPUT
    assert call.body["stream"] is True and len(call.body["tools"]) > 5
    assert call.betas == MODEL_BETAS
    assert call.headers["anthropic-version"] == "2023-06-01"
    assert [m["role"] for m in call.body["messages"]] == ["user", "system"]  # its env block
    assert {(c.method, c.path) for c in calls} <= {("HEAD", "/api/hello"),
                                                  ("POST", "/v1/messages?beta=true")}


def test_continue_and_thinking(clis: dict[str, Path], proxy: Stack, environment: dict[str, str],
                               workdir: Path) -> None:
    rules = [("Think", "<think>\nWeigh both options.\n</think>\n\nThe first option.")]
    out, calls = claude(clis, proxy, environment, workdir, rules, "--continue", "Think first")
    assert out.strip() == "The first option."
    (call,) = messages(calls)
    assert call.route == "append"
    assert call.body["thinking"]["type"] in ("adaptive", "enabled")
    # the thinking block comes back signed on the next call, which is still a repair
    out, calls = claude(clis, proxy, environment, workdir, [], "--continue", "Thanks")
    (call,) = messages(calls)
    blocks = [b for m in call.body["messages"] if m["role"] == "assistant"
              for b in m["content"] if isinstance(m["content"], list)]
    thinking = [b for b in blocks if b["type"] == "thinking"]
    assert thinking and thinking[-1]["thinking"].strip() == "Weigh both options."
    assert thinking[-1]["signature"]
    assert call.route in ("append", "edit")


def test_bash_tool_loop(clis: dict[str, Path], proxy: Stack, environment: dict[str, str],
                        workdir: Path) -> None:
    rules = [("<tool_response>\ntoksplice-42", "It printed toksplice-42."),
             ("Run the marker", tool_call("Bash", {"command": "echo toksplice-$((6*7))",
                                                   "description": "Print the marker"}))]
    out, calls = claude(clis, proxy, environment, workdir, rules, "--continue",
                        "Run the marker", "--allowedTools", "Bash")
    assert out.strip() == "It printed toksplice-42."
    first, second = messages(calls)
    result = second.body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "toksplice-42" in str(result["content"])
    assert first.route == second.route == "append"


def test_subagent(clis: dict[str, Path], proxy: Stack, environment: dict[str, str],
                  workdir: Path) -> None:
    rules = [("subagent-done", "The subagent said subagent-done."),
             ("SUBTASK", "subagent-done"),
             ("Delegate", tool_call("Agent", {"description": "Do the subtask",
                                              "prompt": "SUBTASK: answer subagent-done",
                                              "subagent_type": "general-purpose"}))]
    out, calls = claude(clis, proxy, environment, workdir, rules, "--continue", "Delegate it")
    assert "The subagent said subagent-done." in out
    agents = {c.headers.get("x-claude-code-agent-id") for c in messages(calls)} - {None}
    assert len(agents) == 1, "one subagent, with its own agent id"
    sessions = {c.headers["x-claude-code-session-id"] for c in messages(calls)}
    assert len(sessions) == 1, "the subagent shares the session id"


def test_context_counts_tokens(clis: dict[str, Path], proxy: Stack,
                               environment: dict[str, str], workdir: Path) -> None:
    out, calls = claude(clis, proxy, environment, workdir, [], "/context")
    counts = [c for c in calls if c.path == "/v1/messages/count_tokens?beta=true"]
    assert len(counts) > 5 and f"/ {CONTEXT / 1000:.1f}k" in out
    assert all(c.betas == COUNT_BETAS for c in counts)
