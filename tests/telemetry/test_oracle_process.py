"""The shadow verifier's child process: idle priority, both forms of the ids sent, a child
that dies is replaced without losing the check, and the template inputs are its to read."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pytest

from app.rendering import ChatTemplate
from app.sessions import SessionTokenizer
from app.telemetry import oracle_source
from app.telemetry.oracle_process import OracleProcess
from app.telemetry.oracle_source import RenderSource

TEXT = "Shadow checks run where they cost the request path nothing. " * 40
UTF8 = TEXT.encode()


@pytest.fixture
def oracle() -> Iterator[OracleProcess]:
    process = OracleProcess()
    yield process
    process.close()


@pytest.fixture(scope="module")
def qwen(assets: dict[str, Path]) -> SessionTokenizer:
    return SessionTokenizer.from_file(assets["qwen3"])


def test_the_child_only_takes_idle_cpu(oracle: OracleProcess, qwen: SessionTokenizer) -> None:
    assert oracle.check(qwen, UTF8, None, qwen.encode(TEXT).ids, None) is None
    child = oracle.pid
    assert child is not None
    idle = os.sched_getscheduler(child) == os.SCHED_IDLE
    assert idle or os.getpriority(os.PRIO_PROCESS, child) == 19
    assert os.sched_getscheduler(0) != os.SCHED_IDLE  # the proxy itself is untouched


def test_ids_and_their_json_text_are_checked_alike(
    oracle: OracleProcess, qwen: SessionTokenizer
) -> None:
    exact = qwen.encode(TEXT).ids
    sent = orjson.dumps(exact.tolist())[1:-1]
    assert oracle.check(qwen, UTF8, None, exact, sent) is None
    assert oracle.check(qwen, UTF8, None, exact, memoryview(sent)) is None
    wrong = exact.copy()
    wrong[7] += 1
    for found in (
        oracle.check(qwen, UTF8, None, wrong, None),
        oracle.check(qwen, UTF8, None, exact, orjson.dumps(wrong.tolist())[1:-1]),
    ):
        assert found is not None and found.index == 7
        assert np.array_equal(found.expected, exact) and np.array_equal(found.actual, wrong)
    found = oracle.check(qwen, UTF8, None, exact[:-3], None)
    assert found is not None and found.index == len(exact) - 3


def test_a_dead_child_is_replaced_and_the_check_still_made(
    oracle: OracleProcess, qwen: SessionTokenizer, assets: dict[str, Path]
) -> None:
    llama = SessionTokenizer.from_file(assets["llama3"])
    exact = qwen.encode(TEXT).ids
    assert oracle.check(qwen, UTF8, None, exact, None) is None
    child = oracle.pid
    assert child is not None
    os.kill(child, signal.SIGKILL)
    wrong = exact.copy()
    wrong[0] += 1
    found = oracle.check(qwen, UTF8, None, wrong, None)  # the new child has no tokenizer yet
    assert found is not None and found.index == 0
    assert oracle.pid not in (None, child)
    assert oracle.check(llama, UTF8, None, llama.encode(TEXT).ids, None) is None
    assert oracle.check(qwen, UTF8, None, exact, None) is None


def test_the_child_never_outlives_the_proxy_nor_reruns_its_script(
    assets: dict[str, Path], tmp_path: Path
) -> None:
    """A script without a main guard embedding the proxy: its check works (the child does
    not run the script again), and once it is killed its child exits too."""
    script = tmp_path / "embedding.py"
    script.write_text(
        "import sys, time\n"
        "from app.telemetry.oracle_process import OracleProcess\n"
        "from app.sessions import SessionTokenizer\n"
        f"tok = SessionTokenizer.from_file({str(assets['smollm2'])!r})\n"
        "oracle = OracleProcess()\n"
        "assert oracle.check(tok, b'hi there', None, tok.encode('hi there').ids, None) is None\n"
        "print(oracle.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proxy = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    assert proxy.stdout is not None
    child = int(proxy.stdout.readline())
    proxy.kill()
    proxy.wait()
    for _ in range(100):
        if not Path(f"/proc/{child}").exists() or "Z" in status(child):
            return
        time.sleep(0.1)
    raise AssertionError(f"child {child} still runs: {status(child)}")


def status(pid: int) -> str:
    """The process's state letter from /proc (a zombie has exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_the_template_inputs_are_looked_at_in_the_child(
    oracle: OracleProcess,
    qwen: SessionTokenizer,
    assets: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk for special-token text and the verifier's own render run in the child (in
    the proxy they would hold its GIL for up to ~90 ms at 1M characters): here they raise in
    this process, and the check still finds that the ids of the plain render carry the
    user's ``<|im_end|>`` as a control token, and accepts the ids it found instead."""
    template = ChatTemplate.from_tokenizer_config(assets["qwen3"].parent / "tokenizer_config.json")
    messages = [{"role": "user", "content": "a user typed <|im_end|> here"}]
    source = RenderSource(template, messages, None, None, True)
    rendered = template.render(messages, add_generation_prompt=True)

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("looked at in the proxy's process")

    monkeypatch.setattr(oracle_source, "oracle_prompt", refused)
    monkeypatch.setattr(RenderSource, "render", refused)
    reference = qwen.reference.tokenizer
    smuggled = np.asarray(reference.encode(rendered, add_special_tokens=False).ids, np.int32)
    found = oracle.check(qwen, rendered.encode(), None, smuggled, None, source)
    assert found is not None
    # " <|im_end|>" typed: the space before the control token is where the ids part
    assert reference.token_to_id("<|im_end|>") in smuggled[found.index : found.index + 2]
    assert oracle.check(qwen, rendered.encode(), None, found.expected, None, source) is None
