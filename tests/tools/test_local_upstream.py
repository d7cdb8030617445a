"""The local llama.cpp upstream: start and stop, token-id prompts, chat templates, clear errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import httpx
import pytest
from tokenizers import Tokenizer

from app.tools.local_upstream import LocalLlamaServer, LocalUpstreamError

needs_xllamacpp = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None, reason="xllamacpp is not installed"
)
CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def smollm2(smollm2_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(smollm2_dir / "tokenizer.json"))


@needs_xllamacpp
def test_start_and_stop(assets: dict[str, Path]) -> None:
    server = LocalLlamaServer(assets["smollm2_gguf"], n_ctx=2048, n_parallel=1)
    with server:
        assert server.running
        assert server.url.startswith("http://127.0.0.1:")
        url = server.url
        assert httpx.get(url + "/health", timeout=5).json() == {"status": "ok"}
        with pytest.raises(LocalUpstreamError, match="already started"):
            server.start()
    assert not server.running
    with pytest.raises(LocalUpstreamError, match="not started"):
        _ = server.url
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health", timeout=5)
    server.stop()  # idempotent


def test_token_id_prompt_returns_text(llama_server: LocalLlamaServer, smollm2: Tokenizer) -> None:
    ids = smollm2.encode(CHAT, add_special_tokens=False).ids
    assert ids[0] == smollm2.token_to_id("<|im_start|>")
    body = {"prompt": ids, "max_tokens": 8, "temperature": 0}
    reply = httpx.post(llama_server.url + "/v1/completions", json=body, timeout=60)
    reply.raise_for_status()
    data = reply.json()
    assert data["choices"][0]["text"].strip()
    assert data["usage"]["prompt_tokens"] == len(ids)


def test_batch_of_token_id_prompts(llama_server: LocalLlamaServer, smollm2: Tokenizer) -> None:
    prompts = [smollm2.encode(text, add_special_tokens=False).ids for text in (CHAT, "1, 2, 3,")]
    body = {"prompt": prompts, "max_tokens": 4, "temperature": 0}
    reply = httpx.post(llama_server.url + "/v1/completions", json=body, timeout=60)
    reply.raise_for_status()
    assert sorted(c["index"] for c in reply.json()["choices"]) == [0, 1]


def test_apply_template_renders_chatml(llama_server: LocalLlamaServer) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    reply = httpx.post(
        llama_server.url + "/apply-template", json={"messages": messages}, timeout=30
    )
    reply.raise_for_status()
    assert reply.json()["prompt"] == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    with pytest.raises(LocalUpstreamError, match=r"exited with code 2(.|\n)*does not exist"):
        LocalLlamaServer(missing).start()


@needs_xllamacpp
def test_unloadable_model_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + bytes(64))
    server = LocalLlamaServer(bad)
    with pytest.raises(LocalUpstreamError, match=r"(?s)exited with code 1.*could not serve"):
        server.start()
    assert not server.running


def test_start_timeout_is_a_clear_error(assets: dict[str, Path]) -> None:
    server = LocalLlamaServer(assets["smollm2_gguf"], start_timeout=0.0)
    with pytest.raises(LocalUpstreamError, match=r"not ready after 0 s .*last /health: no address"):
        server.start()
    assert not server.running
