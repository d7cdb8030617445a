"""Fixtures of the agent tests: the pinned CLIs from npm, cached with the other assets."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app import assets as app_assets


@pytest.fixture(scope="session")
def clis(assets_dir: Path) -> dict[str, Path]:
    """``claude`` and ``codex`` executables (``app.assets.agents``, installed once); skips
    only when npm is not installed."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: no Claude Code or Codex CLI to run")
    return app_assets.agents(assets_dir)


@pytest.fixture(scope="session")
def qwen3_dir(assets: dict[str, Path]) -> Path:
    return assets["qwen3"].parent
