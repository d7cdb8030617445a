"""Shared fixtures: the real tokenizers of docs/assets.md, fetched once per session, and a real
llama.cpp upstream serving SmolLM2 from its GGUF."""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from tokenizers import Tokenizer

from app.config import ENV_PREFIX, Settings
from app.tools import assets as app_assets
from app.tools.local_upstream import LocalLlamaServer
from app.tools.model_pins import MODEL_TOKENIZERS
from tests.services import RedisServer

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Settings()`` reads ``TOKSPLICE_<FIELD>`` variables: tests start without any set, so a
    shell's exports cannot change what they check (a test sets its own with ``monkeypatch``)."""
    for field in Settings.model_fields:
        monkeypatch.delenv(ENV_PREFIX + field.upper(), raising=False)


@pytest.fixture(scope="session")
def assets_dir() -> Path:
    """The asset cache: ``$TOKSPLICE_ASSETS_DIR``, else ``.assets`` at the repository root."""
    env = os.environ.get(app_assets.ENV_VAR)
    return Path(env) if env else REPO_ROOT / ".assets"


@pytest.fixture(scope="session")
def assets(assets_dir: Path) -> dict[str, Path]:
    """``app.tools.assets.fetch()``'s, ``servers()``' and ``models()``' paths. Errors propagate:
    a missing asset fails, never skips."""
    found = app_assets.fetch(assets_dir) | app_assets.servers(assets_dir)
    return found | app_assets.models(assets_dir)


@pytest.fixture(scope="session")
def reference(assets: dict[str, Path]) -> Callable[[str], Tokenizer]:
    """``name -> tokenizers.Tokenizer`` for the names in ``app.tools.assets.NAMES`` and the
    models' tokenizers (``model_pins.MODEL_TOKENIZERS``), loaded once."""

    @functools.cache
    def load(name: str) -> Tokenizer:
        known = (*app_assets.NAMES, *MODEL_TOKENIZERS)
        if name not in known:
            raise KeyError(f"unknown tokenizer {name!r}; known: {', '.join(known)}")
        return Tokenizer.from_file(str(assets[name]))

    return load


@pytest.fixture(scope="session")
def sglang_api(assets: dict[str, Path]) -> ModuleType:
    """SGLang's generated API types (msgspec), loaded from the pinned wheel's file alone."""
    spec = importlib.util.spec_from_file_location("sglang_api_types", assets["sglang_api"])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def smollm2_dir(assets: dict[str, Path]) -> Path:
    """The folder with SmolLM2's rebuilt ``tokenizer.json``, ``tokenizer_config.json`` and GGUF."""
    return assets["smollm2"].parent


@pytest.fixture(scope="session")
def llama_server(assets: dict[str, Path]) -> Iterator[LocalLlamaServer]:
    """A llama.cpp server on 127.0.0.1 serving SmolLM2 (2 slots of 4,096 tokens, 1 thread).

    Skips only when xllamacpp is not installed; a server that fails to start fails the test.
    """
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is not installed (pip install -e '.[dev]'): no local llama.cpp")
    with LocalLlamaServer(assets["smollm2_gguf"]) as server:
        yield server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real ``redis-server`` on a free 127.0.0.1 port (fails, never skips, without one)."""
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
