"""Claude Code through ``toksplice serve --dialect vllm-completions`` with
``--strip-billing-line`` left at ``auto``: the proxy drops the CLI's billing line from the
system turn as vLLM 0.33 does, so every prompt equals the reference encode of the request as
vLLM's chat parsing strips it (its own ``_strip_claude_code_billing_header``, read from the
pinned wheel), the line never reaches the model, and the tool loop's continuation is an
``append``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from app.protocol.billing_line import HEADER
from app.tools import assets as app_assets
from tests.agents import test_claude_code as claude_code
from tests.agents.harness import Call, Stack, check, claude_env, stack, tool_call
from tests.rendering import vllm_source


@pytest.fixture(scope="module")
def served(qwen3_dir: Path) -> Iterator[Stack]:
    with stack(qwen3_dir, "--dialect", "vllm-completions") as served_:
        yield served_


def test_the_billing_line_is_gone_and_the_tool_loop_appends(
    clis: dict[str, Path], served: Stack, tmp_path: Path, assets_dir: Path
) -> None:
    strip = vllm_source.billing_strip(app_assets.servers(assets_dir)["vllm_chat_message"])

    def chat_of(call: Call) -> dict[str, Any]:
        chat = claude_code.chat_of(call)
        return chat | {"messages": vllm_source.billing_step(chat["messages"], strip)}

    marker = "toksplice-42"
    bash = {"command": "echo toksplice-$((6*7))", "description": "Print the marker"}
    rules = [(f"<tool_response>\n{marker}", f"It printed {marker}."),
             ("Run the marker", tool_call("Bash", bash))]  # fmt: skip
    served.answer_by(rules)
    environment = claude_env(tmp_path / "home", served.url, context=claude_code.CONTEXT,
                             output=claude_code.OUTPUT)  # fmt: skip
    done = subprocess.run(
        [str(clis["claude"]), "-p", "Run the marker", "--allowedTools", "Bash"],
        env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert done.stdout.strip() == f"It printed {marker}."
    prompts = list(served.prompts)
    first, second = claude_code.messages(check(served, chat_of, claude_code.transcript))
    assert first.body["system"][0]["text"].startswith(HEADER)  # the CLI sends it
    assert first.route == "full" and second.route == "append"
    tokenizer = Tokenizer.from_file(str(served.folder / "tokenizer.json"))
    texts = [tokenizer.decode(p, skip_special_tokens=False) for p in prompts]
    assert texts and not any(HEADER in t for t in texts)
    rest = [b["text"] for b in first.body["system"][1:]]
    assert rest and all(text in texts[0] for text in rest)  # the rest of the system turn
