"""Fixtures of the agent tests: the pinned CLIs from npm, cached with the other assets."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.tools import assets as app_assets
from tests.agents.harness import Stack, stack


@pytest.fixture(scope="session")
def clis(assets_dir: Path) -> dict[str, Path]:
    """``claude`` and ``codex`` executables (``app.tools.assets.agents``, installed once); skips
    only when npm is not installed."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: no Claude Code or Codex CLI to run")
    return app_assets.agents(assets_dir)


@pytest.fixture(scope="session")
def qwen3_dir(assets: dict[str, Path]) -> Path:
    return assets["qwen3"].parent


@pytest.fixture(scope="module")
def proxy(qwen3_dir: Path) -> Iterator[Stack]:
    """One stand-in, proxy and recording front per test module."""
    with stack(qwen3_dir) as served:
        yield served


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CLI's working folder, shared by a module's tests (``--continue`` finds it there)."""
    return tmp_path_factory.mktemp("work")
