"""The agent CLIs as test assets: ``toksplice assets`` says when it cannot install them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.tools import assets as app_assets


def test_without_npm_the_cli_assets_are_skipped_and_said(
    assets_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    app_assets.fetch(assets_dir)  # the tokenizers are there: nothing below downloads
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert app_assets.main(assets_dir) == 0
    assert "skipped the agent CLIs: npm is not installed" in capsys.readouterr().err
    with pytest.raises(app_assets.AssetError, match="npm is not installed"):
        app_assets.agents(tmp_path)


def test_installed_clis_are_found_without_npm(clis: dict[str, Path], assets_dir: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert app_assets.agents(assets_dir) == clis
