"""Codex CLI itself (npm, pinned) through ``toksplice serve``, configured only as the README
says (a throwaway ``CODEX_HOME`` with its ``config.toml``): ``codex exec``, ``exec resume
--last`` and one shell tool call, against the scripted Qwen3 stand-in (see ``harness``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.protocol.responses_request import chat_body
from tests.agents.harness import Call, Stack, check, codex_env, tool_call


@pytest.fixture(scope="module")
def environment(proxy: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return codex_env(tmp_path_factory.mktemp("home"), proxy.url)


def transcript(call: Call) -> tuple[str, ...]:
    return (call.headers.get("session-id", ""),)


def codex(clis: dict[str, Path], proxy: Stack, environment: dict[str, str], workdir: Path,
          rules: list[tuple[str, str]], *args: str) -> tuple[str, list[Call]]:
    proxy.answer_by(rules)
    done = subprocess.run([str(clis["codex"]), "exec", "--skip-git-repo-check", *args],
                          env=environment, cwd=workdir, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    return done.stdout, check(proxy, lambda c: chat_body(c.body), transcript)


def test_exec(clis: dict[str, Path], proxy: Stack, environment: dict[str, str],
              workdir: Path) -> None:
    out, calls = codex(clis, proxy, environment, workdir, [], "Say hello")
    assert out.strip() == "Hello."
    (call,) = calls
    assert (call.method, call.path, call.route) == ("POST", "/v1/responses", "full")
    assert call.body["stream"] is True and call.body["store"] is False
    assert call.body["prompt_cache_key"] == call.headers["session-id"]
    assert call.headers["originator"] == "codex_exec"


def test_resume_with_a_shell_call(clis: dict[str, Path], proxy: Stack,
                                  environment: dict[str, str], workdir: Path) -> None:
    rules = [("toksplice-42", "It printed toksplice-42."),
             ("Run the marker", tool_call("exec_command", {"cmd": "echo toksplice-$((6*7))"}))]
    out, calls = codex(clis, proxy, environment, workdir, rules,
                       "resume", "--last", "Run the marker")
    assert out.strip() == "It printed toksplice-42."
    first, second = calls
    output = second.body["input"][-1]
    assert output["type"] == "function_call_output" and "toksplice-42" in str(output["output"])
    assert first.route == second.route == "append"
    assert {c.path for c in calls} == {"/v1/responses"}
