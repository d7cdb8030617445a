"""Shared fixtures: the real tokenizers of ASSETS.md, fetched once per session."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from app import assets as app_assets

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def assets_dir() -> Path:
    """The asset cache: ``$TOKSPLICE_ASSETS_DIR``, else ``.assets`` at the repository root."""
    env = os.environ.get(app_assets.ENV_VAR)
    return Path(env) if env else REPO_ROOT / ".assets"


@pytest.fixture(scope="session")
def assets(assets_dir: Path) -> dict[str, Path]:
    """``app.assets.fetch()``'s paths. Errors propagate: a missing asset fails, never skips."""
    return app_assets.fetch(assets_dir)


@pytest.fixture(scope="session")
def reference(assets: dict[str, Path]) -> Callable[[str], Tokenizer]:
    """``name -> tokenizers.Tokenizer`` for the names in ``app.assets.NAMES``, loaded once."""

    @functools.cache
    def load(name: str) -> Tokenizer:
        if name not in app_assets.NAMES:
            raise KeyError(f"unknown tokenizer {name!r}; known: {', '.join(app_assets.NAMES)}")
        return Tokenizer.from_file(str(assets[name]))

    return load
