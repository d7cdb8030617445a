"""``--store`` / ``TOKSPLICE_STORE`` and ``--api-keys-file`` as settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.api.auth import ApiKeys
from app.config import Settings
from app.main import session_store
from app.sessions.memory import MemoryStore
from app.sessions.redis_store import RedisStore
from app.sessions.registry import SessionRegistry
from tests.services import RedisServer


def test_store_setting(
    assets: dict[str, Path], redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKSPLICE_TOKENIZER", str(assets["qwen3"]))
    sessions = SessionRegistry(1 << 20)
    assert isinstance(session_store(Settings(), sessions), MemoryStore)
    monkeypatch.setenv("TOKSPLICE_STORE", redis_server.url)
    settings = Settings()
    store = session_store(settings, sessions)
    try:
        assert isinstance(store, RedisStore) and store.registry is sessions
        assert settings.store_ttl == 86400 and settings.redis_timeout == 0.1
    finally:
        store.close()
    with pytest.raises(ValueError, match="Redis URL"):
        Settings(store="memcached://x")


def test_api_keys_file(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"k1": "acme"}))
    keys = ApiKeys.from_file(path)
    assert keys.tenant("k1") == "acme" and keys.tenant("k2") is None and keys.tenant(None) is None
    assert "k1" not in repr(vars(keys))  # only digests are kept
    path.write_text(json.dumps(["k1"]))
    with pytest.raises(ValueError, match="API key -> tenant"):
        ApiKeys.from_file(path)
