"""The demo serves an agent: ``toksplice demo`` (real llama.cpp + SmolLM2) answers Claude Code's
first call; and a template without tool syntax (SmolLM2's) never drops tools silently."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from app.rendering import ChatTemplate
from loadtest.processes import free_port, process
from tests.agents.harness import Call, Front, claude_env
from tests.api.servers import StubUpstream, serving

BASH = {"type": "function", "function": {"name": "Bash", "description": "Run a command.",
                                         "parameters": {"type": "object", "properties": {}}}}


def test_template_without_tool_syntax_is_found(assets: dict[str, Path]) -> None:
    assert ChatTemplate.from_tokenizer_config(assets["smollm2_config"]).drops_tools()
    assert not ChatTemplate.from_tokenizer_config(assets["qwen3_config"]).drops_tools()


def test_dropped_tools_are_said(smollm2_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    body = {"model": "m", "max_tokens": 4, "tools": [BASH, BASH],
            "messages": [{"role": "user", "content": "List the files."}]}
    caplog.set_level(logging.WARNING, logger="app.service.chat")
    with StubUpstream().serve() as upstream, serving(create_app(Settings(
            upstream=upstream, tokenizer=smollm2_dir, model="m", alignment_check=False))) as url, \
            httpx.Client(base_url=url, timeout=30) as http:
        replies = [http.post("/v1/chat/completions", json=body) for _ in range(2)]
        plain = http.post("/v1/chat/completions", json={**body, "tools": None})
        metrics = http.get("/metrics").text
    assert [r.headers.get("x-toksplice-tools-dropped") for r in replies] == ["2", "2"]
    assert plain.status_code == 200 and "x-toksplice-tools-dropped" not in plain.headers
    assert "toksplice_tools_dropped_total 2.0" in metrics
    warnings = [r for r in caplog.records if "renders no tools" in r.getMessage()]
    assert len(warnings) == 1, "one warning per session"


def test_claude_code_first_call_through_the_demo(clis: dict[str, Path], tmp_path: Path) -> None:
    """The real demo, started as a user starts it, and Claude Code set up as the README says
    for it: its first call (~3.9K tokens with SmolLM2's template) gets a streamed answer.  The
    135M model rarely ends within a few tokens, and Claude Code then asks again (a reply cut
    at ``max_tokens`` makes it continue), so the CLI is stopped once that first answer is in:
    the calls after it would only take minutes of CPU."""
    pytest.importorskip("xllamacpp")
    port = free_port()
    demo = [sys.executable, "-m", "app", "demo", "--port", str(port), "--threads", "1"]
    with process(demo, f"http://127.0.0.1:{port}/health"):
        front = Front(f"http://127.0.0.1:{port}")
        with serving(front.app()) as url:
            env = claude_env(tmp_path, url, model="smollm2", context=8192, output=8)
            cli = subprocess.Popen([str(clis["claude"]), "-p", "Say hello"], env=env,
                                   cwd=tmp_path, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 900
                while not (answered := _answered(front)) and cli.poll() is None:
                    assert time.monotonic() < deadline, "no answer to the first call"
                    time.sleep(0.5)
            finally:
                cli.terminate()
                cli.wait(timeout=30)
    first = answered or _answered(front)
    assert first is not None and first.status == 200
    assert int(first.reply_headers["x-toksplice-prompt-tokens"]) > 3000
    assert int(first.reply_headers["x-toksplice-tools-dropped"]) == len(first.body["tools"])
    text = [line for line in first.reply.decode().splitlines() if '"text_delta"' in line]
    assert text, "the answer streamed no text"
    stops = (b'"stop_reason":"end_turn"', b'"stop_reason":"max_tokens"')
    assert any(stop in first.reply for stop in stops)


def _answered(front: Front) -> Call | None:
    """The first model call, once its streamed answer is complete."""
    calls = [c for c in front.calls if c.path.startswith("/v1/messages?")]
    return calls[0] if calls and b"message_stop" in calls[0].reply else None
