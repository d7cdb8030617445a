"""Fixtures of the agent tests: the pinned CLIs from npm, cached with the other assets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.harness import NpmMissing, install_clis


@pytest.fixture(scope="session")
def clis(assets_dir: Path) -> dict[str, Path]:
    """``claude`` and ``codex`` executables; skips only when npm is not installed."""
    try:
        return install_clis(assets_dir)
    except NpmMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def qwen3_dir(assets: dict[str, Path]) -> Path:
    return assets["qwen3"].parent
