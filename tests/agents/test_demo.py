"""The demo serves an agent: ``toksplice demo`` (real llama.cpp + SmolLM2) answers Claude Code's
first call; and a template without tool syntax (SmolLM2's) never drops tools silently."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from app.rendering import ChatTemplate
from loadtest.processes import free_port, process
from tests.agents.harness import Front, claude_env
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
    for it: the first call (~4.2K tokens with SmolLM2's template) gets an answer."""
    pytest.importorskip("xllamacpp")
    port = free_port()
    demo = [sys.executable, "-m", "app", "demo", "--port", str(port), "--threads", "1"]
    with process(demo, f"http://127.0.0.1:{port}/health"):
        front = Front(f"http://127.0.0.1:{port}")
        with serving(front.app()) as url:
            env = claude_env(tmp_path, url, model="smollm2", context=8192, output=32)
            done = subprocess.run([str(clis["claude"]), "-p", "Say hello"], env=env,
                                  cwd=tmp_path, capture_output=True, text=True, timeout=900,
                                  check=False)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert done.stdout.strip()
    (call,) = [c for c in front.calls if c.path.startswith("/v1/messages")]
    assert call.status == 200 and int(call.reply_headers["x-toksplice-prompt-tokens"]) > 3000
    assert int(call.reply_headers["x-toksplice-tools-dropped"]) == len(call.body["tools"])
